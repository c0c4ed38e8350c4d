#!/usr/bin/env bash
# Installs every Debian 12 package loupe's build, tests, benchmarks and peer comparisons need.
# Idempotent: packages already present are skipped, so a second run does no network work.
set -euo pipefail

BUILD_PKGS=(
  build-essential cmake ninja-build pkg-config git clang-format
  clang llvm libclang-rt-14-dev libbpf-dev bpftool libelf-dev libdw-dev zlib1g-dev
  libboost-dev libtomlplusplus-dev libspdlog-dev libfmt-dev libcli11-dev nlohmann-json3-dev
  libgtest-dev libgmock-dev libbenchmark-dev
  libprotobuf-dev protobuf-compiler libcpp-httplib-dev
  systemtap-sdt-dev libdebuginfod-dev libjemalloc-dev
  dpkg-dev  # dpkg-shlibdeps: the .deb's Depends (cmake --build build --target package)
)
# The kernel matrix (scripts/vmtest.sh): Debian's 6.1 and 6.12 kernels booted under qemu.
# LOUPE_WITH_VMTEST=0 leaves them out (CI never does).
VMTEST_PKGS=(qemu-system-x86 busybox-static kmod e2fsprogs)
PEER_PKGS=(bpftrace libbpf-tools linux-perf python3)
# Large, optional, for tests only: the consumers the sinks are checked against
# (go tool pprof, promtool + a Prometheus server, headless Chromium) and glibc's separate
# debug file (libc6-dbg: static functions such as _int_malloc), a debuginfod server to serve
# the symbolizer test its debug files, a JDK (java + javac: cpusample's Java tests compile
# and profile a JVM), systemd's systemd-analyze (tests/package verifies loupe.service). Tests
# skip with a reason when one is missing; LOUPE_WITH_TEST_TOOLS=0 leaves them out.
TEST_PKGS=(golang-go prometheus chromium libc6-dbg debuginfod tmux openjdk-17-jdk-headless systemd)

want=("${BUILD_PKGS[@]}")
if [[ "${LOUPE_WITH_VMTEST:-1}" == 1 ]]; then want+=("${VMTEST_PKGS[@]}"); fi
if [[ "${LOUPE_WITH_PEERS:-1}" == 1 ]]; then want+=("${PEER_PKGS[@]}"); fi
if [[ "${LOUPE_WITH_TEST_TOOLS:-1}" == 1 ]]; then want+=("${TEST_PKGS[@]}"); fi
optional=("${PEER_PKGS[@]}" "${TEST_PKGS[@]}")

missing=()
for p in "${want[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$p")
  fi
done

if ((${#missing[@]} == 0)); then
  echo "install-deps: all ${#want[@]} packages present"
  exit 0
fi

SUDO=""
if [[ $(id -u) -ne 0 ]]; then SUDO="sudo"; fi
echo "install-deps: installing ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
# Peers and test tools are optional: one that fails to install must not block the build.
$SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" || {
  echo "install-deps: retrying without peer and test tools" >&2
  core=()
  for p in "${missing[@]}"; do
    [[ " ${optional[*]} " == *" $p "* ]] || core+=("$p")
  done
  ((${#core[@]} == 0)) || $SUDO apt-get install -y -qq --no-install-recommends "${core[@]}"
}
