#!/usr/bin/env bash
# Runs a command on another kernel: boots Debian's own kernel package under qemu (TCG) with
# this machine's root file system, read-only over virtio-9p under a tmpfs overlay, and runs
# the command there, in place, with the host's working directory. No image and no second
# build: the guest runs the binaries already built here.
#
#   scripts/vmtest.sh KERNEL [command [args...]]
#
#   KERNEL   6.1 | 6.12          newest Debian 12 package of that series (linux-image-amd64's
#                                dependency when it belongs to the series, else the highest
#                                linux-image-<series>.*-amd64 apt knows)
#            6.12.117+deb12      an exact package version (linux-image-<version>-amd64)
#            linux-image-...     an exact package name
#   command  default `uname -a`; its exit status is this script's.
#
# Examples:
#   scripts/vmtest.sh 6.1 build/bin/loupe check
#   scripts/vmtest.sh 6.12 ctest --test-dir build -L kernel -j2 --output-on-failure
#
# Inside the guest: 2 vCPUs, proc/sys/dev/tracefs/debugfs/bpffs/cgroup2 mounted, the kernel's
# own modules under /lib/modules/$(uname -r), /tmp an ext4 file system on a scratch virtio-blk
# disk (so O_DIRECT and block-I/O tests have a real device), PATH, HOME=/root, TMPDIR=/tmp,
# and the host's LOUPE_*, GTEST_*, CTEST_* variables. Writes land in the overlay and vanish.
#
# Environment:
#   LOUPE_VMTEST_TIMEOUT   seconds before the guest is killed (default 3600; exit 124)
#   LOUPE_VMTEST_CACHE     unpacked kernels (default /var/cache/loupe-vmtest as root, else
#                          ${XDG_CACHE_HOME:-~/.cache}/loupe-vmtest); a second run downloads
#                          nothing
#   LOUPE_VMTEST_MEM       guest memory (default 3G)
#   LOUPE_VMTEST_SMP       guest vCPUs (default 2)
#   LOUPE_VMTEST_DISK_MB   scratch disk size (default 512; a sparse file)
#   LOUPE_VMTEST_ACCEL     qemu accelerator (default tcg, single-threaded: this machine's
#                          /dev/kvm is a nested hypervisor that cannot run stock kernels, and
#                          multi-threaded TCG corrupts kernel text patching; see below)
#   LOUPE_VMTEST_APPEND    extra kernel command line
#   LOUPE_VMTEST_MONITOR   a path: qemu's monitor on that unix socket, to inspect a hung guest
#                          (socat - UNIX-CONNECT:PATH, then `info registers -a`, `x/8i $pc`)
#
# Exit status: the command's; 124 on timeout; 125 when the guest could not run it (boot,
# mount or kernel failure: the console output above says which).
set -euo pipefail

die() { echo "vmtest: $*" >&2; exit 125; }

usage() { sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; }

[[ $# -ge 1 ]] || { usage >&2; exit 2; }
case "$1" in -h | --help) usage; exit 0 ;; esac
spec="$1"; shift
(($# > 0)) || set -- uname -a

[[ $(uname -m) == x86_64 ]] || die "only x86_64 hosts are supported (amd64 kernel packages)"

# --- tools -------------------------------------------------------------------------------
need_pkg() { # command package
  command -v "$1" >/dev/null 2>&1 ||
    die "$1 not found: install the Debian package $2 (scripts/install-deps.sh does)"
}
need_pkg qemu-system-x86_64 qemu-system-x86
need_pkg depmod kmod
need_pkg modprobe kmod
need_pkg dpkg-deb dpkg
need_pkg apt-get apt
need_pkg mkfs.ext4 e2fsprogs
BUSYBOX=/bin/busybox
[[ -x $BUSYBOX ]] || die "$BUSYBOX not found: install the Debian package busybox-static"
if LC_ALL=C readelf -l "$BUSYBOX" 2>/dev/null | grep -q 'program interpreter'; then
  die "$BUSYBOX is dynamically linked: install the Debian package busybox-static"
fi

# --- kernel package ----------------------------------------------------------------------
if [[ -n ${LOUPE_VMTEST_CACHE:-} ]]; then
  CACHE=$LOUPE_VMTEST_CACHE
elif [[ $(id -u) -eq 0 ]]; then
  CACHE=/var/cache/loupe-vmtest
else
  CACHE=${XDG_CACHE_HOME:-$HOME/.cache}/loupe-vmtest
fi
mkdir -p "$CACHE"

available() { apt-cache show --no-all-versions "$1" >/dev/null 2>&1; }

resolve_package() {
  local s=$1 re dep
  if [[ $s == linux-image-* ]]; then
    echo "$s"
  elif [[ $s =~ ^[0-9]+\.[0-9]+$ ]]; then
    re="^linux-image-${s//./\\.}\\.[0-9]+(-[0-9]+|\\+deb[0-9]+)-amd64\$"
    dep=$(apt-cache depends linux-image-amd64 2>/dev/null | sed -n 's/^ *Depends: //p' |
      grep -E "$re" | head -n1 || true)
    if [[ -n $dep ]] && available "$dep"; then echo "$dep"; return; fi
    apt-cache pkgnames linux-image- 2>/dev/null | grep -E "$re" | sort -rV |
      while read -r p; do if available "$p"; then echo "$p"; break; fi; done
  else
    echo "linux-image-$s-amd64"
  fi
}

pkg=$(resolve_package "$spec" || true)
if [[ -z $pkg ]]; then
  # No apt lists (or no network ever): the newest cached kernel of the series still works.
  pkg=$(cd "$CACHE" && ls -d linux-image-"$spec".* 2>/dev/null | sort -rV | head -n1 || true)
  [[ -n $pkg && -f $CACHE/$pkg/.complete ]] ||
    die "no Debian kernel package matches '$spec' (apt-cache knows none; run apt-get update?)"
fi
KDIR=$CACHE/$pkg

fetch_kernel() {
  local tmp deb
  available "$pkg" || die "Debian package $pkg is not available (apt-get update? a typo?)"
  echo "vmtest: downloading $pkg into $KDIR" >&2
  tmp=$(mktemp -d "$CACHE/.fetch.XXXXXX")
  local asroot=()
  [[ $(id -u) -eq 0 ]] && asroot=(-o APT::Sandbox::User=root) # _apt cannot write here
  (cd "$tmp" && apt-get download -q "${asroot[@]}" "$pkg" >&2) || { rm -rf "$tmp"; die "apt-get download $pkg failed"; }
  deb=$(ls "$tmp"/*.deb)
  mkdir "$tmp/root"
  dpkg-deb -x "$deb" "$tmp/root" || { rm -rf "$tmp"; die "dpkg-deb -x $deb failed"; }
  rm -f "$deb"
  local kver
  kver=$(ls "$tmp/root/lib/modules")
  depmod -b "$tmp/root" "$kver" || { rm -rf "$tmp"; die "depmod for $kver failed"; }
  echo "$kver" >"$tmp/root/.kver"
  touch "$tmp/root/.complete"
  rm -rf "$KDIR"
  mv "$tmp/root" "$KDIR"
  rm -rf "$tmp"
}

(
  # One fetch at a time per cache: concurrent runs wait, then find it done.
  flock 9
  [[ -f $KDIR/.complete ]] || fetch_kernel
) 9>"$CACHE/.lock"
KVER=$(cat "$KDIR/.kver")
VMLINUZ=$KDIR/boot/vmlinuz-$KVER
[[ -f $VMLINUZ ]] || die "$pkg has no /boot/vmlinuz-$KVER (not a kernel image package?)"

# --- work dir, cleanup -------------------------------------------------------------------
WORK=$(mktemp -d "${TMPDIR:-/tmp}/loupe-vmtest.XXXXXX")
QEMU_PID=""
TAIL_PID=""
cleanup() {
  [[ -n $QEMU_PID ]] && kill "$QEMU_PID" 2>/dev/null && wait "$QEMU_PID" 2>/dev/null
  [[ -n $TAIL_PID ]] && kill "$TAIL_PID" 2>/dev/null && wait "$TAIL_PID" 2>/dev/null
  rm -rf "$WORK"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM HUP

# --- initramfs: static busybox, the modules to reach the root, two scripts ---------------
IRD=$WORK/initramfs
mkdir -p "$IRD"/{bin,sbin,proc,sys,dev,lower,rw,newroot,vmtest/mod}
cp "$BUSYBOX" "$IRD/bin/busybox"

# Module order from the package's own modules.dep; built-in ones are skipped.
: >"$IRD/vmtest/modules"
declare -A seen=()
for m in virtio_pci 9pnet_virtio 9p overlay virtio_blk ext4 loop; do
  deps=$(modprobe -d "$KDIR" -S "$KVER" --show-depends "$m" 2>/dev/null) ||
    die "$pkg has no module $m (nor is it built in)"
  while read -r kind path _; do
    [[ $kind == insmod ]] || continue
    base=$(basename "$path")
    name=${base%%.ko*}
    [[ -n ${seen[$name]:-} ]] && continue
    seen[$name]=1
    case $base in
      *.ko.xz) xz -dc "$path" >"$IRD/vmtest/mod/$name.ko" ;;
      *.ko.zst) zstd -qdc "$path" >"$IRD/vmtest/mod/$name.ko" ;;
      *.ko.gz) gzip -dc "$path" >"$IRD/vmtest/mod/$name.ko" ;;
      *.ko) cp "$path" "$IRD/vmtest/mod/$name.ko" ;;
      *) die "unknown module format: $path" ;;
    esac
    echo "$name" >>"$IRD/vmtest/modules"
  done <<<"$deps"
done

# The command, run by the host's bash inside the chroot: cwd and arguments quoted here.
{
  echo "cd -- $(printf %q "$PWD") || exit 125"
  while IFS='=' read -r k v; do
    echo "export $k=$(printf %q "$v")"
  done < <(env | grep -E '^(LOUPE|GTEST|CTEST)_[A-Za-z0-9_]*=' | grep -v '^LOUPE_VMTEST_' || true)
  printf 'exec'
  printf ' %q' "$@"
  echo
} >"$IRD/vmtest/cmd"
cat >"$IRD/vmtest/stage2" <<'EOF'
# Runs in the chroot (the host's root over 9p + overlay) with the host's bash.
export PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin
export HOME=/root TMPDIR=/tmp TERM=dumb LANG=C.UTF-8 LC_ALL=C.UTF-8
mkdir -p "$HOME"
. /run/vmtest/cmd
EOF

# A working directory under /tmp (a CI checkout there) must stay visible once the scratch
# disk is mounted over /tmp: it is bound aside first and back on top after.
case "$PWD" in /tmp/*) KEEP_CWD=$PWD ;; *) KEEP_CWD= ;; esac

cat >"$IRD/init" <<EOF
#!/bin/busybox sh
KVER='$KVER'
MODDIR='$KDIR/lib/modules/$KVER'
KCONFIG='$KDIR/boot/config-$KVER'
KEEP_CWD='$KEEP_CWD'
EOF
cat >>"$IRD/init" <<'EOF'
/bin/busybox --install -s /bin
export PATH=/bin:/sbin
mount -t proc proc /proc
mount -t sysfs sysfs /sys
mount -t devtmpfs devtmpfs /dev
finish() {
  echo "$1" >/dev/ttyS1
  sync
  sleep 1
  poweroff -f
}
fail() {
  echo "vmtest: $*"
  finish 125
}
for m in $(cat /vmtest/modules); do
  # An optional accelerated module (crc32c-intel) may refuse this CPU: the generic one
  # is loaded as well.
  insmod "/vmtest/mod/$m.ko" 2>/dev/null || echo "vmtest: (insmod $m failed)"
done
mount -t 9p -o trans=virtio,version=9p2000.L,ro,msize=262144,cache=loose hostroot /lower ||
  fail "cannot mount the host root over 9p"
mount -t tmpfs -o mode=0755 rw /rw
mkdir -p /rw/upper /rw/work
mount -t overlay -o lowerdir=/lower,upperdir=/rw/upper,workdir=/rw/work overlay /newroot ||
  fail "cannot mount the overlay"
R=/newroot
mount -t proc proc $R/proc
mount -t sysfs sysfs $R/sys
mount -t devtmpfs devtmpfs $R/dev
mkdir -p $R/dev/pts $R/dev/shm
mount -t devpts devpts $R/dev/pts
mount -t tmpfs tmpfs $R/dev/shm
mount -t tracefs tracefs $R/sys/kernel/tracing 2>/dev/null
mount -t debugfs debugfs $R/sys/kernel/debug
mount -t bpf bpf $R/sys/fs/bpf
mount -t cgroup2 cgroup2 $R/sys/fs/cgroup
mount -t tmpfs -o mode=0755 tmpfs $R/run
mkdir -p $R/run/vmtest
cp /vmtest/cmd /vmtest/stage2 $R/run/vmtest/
# The kernel's own modules, for modprobe inside.
mkdir -p "$R/lib/modules/$KVER" && mount -o bind "$R$MODDIR" "$R/lib/modules/$KVER"
# Its config where Debian puts it (tests read CONFIG_* from /boot/config-$(uname -r)).
mkdir -p $R/boot && cp "$R$KCONFIG" "$R/boot/config-$KVER"
if [ -n "$KEEP_CWD" ]; then
  mkdir -p $R/run/vmtest/cwd && mount -o bind "$R$KEEP_CWD" $R/run/vmtest/cwd
fi
i=0
while [ ! -b /dev/vda ] && [ $i -lt 50 ]; do sleep 0.1; i=$((i + 1)); done
if [ -b /dev/vda ]; then
  mount -t ext4 /dev/vda $R/tmp || fail "cannot mount the scratch disk"
else
  echo "vmtest: no scratch disk, /tmp is a tmpfs"
  mount -t tmpfs tmpfs $R/tmp
fi
chmod 1777 $R/tmp
if [ -n "$KEEP_CWD" ]; then
  mkdir -p "$R$KEEP_CWD" && mount -o bind $R/run/vmtest/cwd "$R$KEEP_CWD"
fi
hostname vmtest
# Loopback up (127.0.0.1 and ::1), as on any booted system: tests talk to themselves.
ip link set lo up 2>/dev/null || ifconfig lo 127.0.0.1 up 2>/dev/null ||
  echo "vmtest: cannot bring the loopback interface up"
chroot $R /bin/bash /run/vmtest/stage2
rc=$?
echo "vmtest: exit status $rc"
finish $rc
EOF
chmod 755 "$IRD/init"
(cd "$IRD" && find . | "$BUSYBOX" cpio -o -H newc 2>/dev/null | gzip -1) >"$WORK/initramfs.gz"

# --- scratch disk ------------------------------------------------------------------------
truncate -s "${LOUPE_VMTEST_DISK_MB:-512}M" "$WORK/scratch.img"
mkfs.ext4 -q -F -L vmtest-tmp "$WORK/scratch.img" >/dev/null

# --- boot --------------------------------------------------------------------------------
: >"$WORK/console"
: >"$WORK/status"
accel=${LOUPE_VMTEST_ACCEL:-tcg}
accel_opt=$accel
# One host thread for all vCPUs. Multi-threaded TCG runs stale translations of kernel text
# that another vCPU just re-patched (text_poke_bp: int3, then the new bytes, then a sync
# IPI): toggling any syscall trace event from one vCPU while the other makes syscalls
# oopses 6.12 ("int3" in syscall_trace_enter / ttwu_do_activate) and locks 6.1 up in soft
# lockups within seconds, with no BPF involved (docs/kernel-matrix.md). thread=single
# serialises the vCPUs, and the same load passes.
[[ $accel == tcg ]] && accel_opt="tcg,thread=single"
monitor=none
[[ -n ${LOUPE_VMTEST_MONITOR:-} ]] && monitor="unix:$LOUPE_VMTEST_MONITOR,server=on,wait=off"
echo "vmtest: booting $pkg ($KVER) under qemu/$accel: $*" >&2
timeout --kill-after=10 "${LOUPE_VMTEST_TIMEOUT:-3600}" \
  qemu-system-x86_64 \
  -accel "$accel_opt" -cpu max -smp "${LOUPE_VMTEST_SMP:-2}" -m "${LOUPE_VMTEST_MEM:-3G}" \
  -display none -no-reboot -nodefaults \
  -monitor "$monitor" \
  -kernel "$VMLINUZ" -initrd "$WORK/initramfs.gz" \
  -append "console=ttyS0 panic=-1 quiet rdinit=/init ${LOUPE_VMTEST_APPEND:-}" \
  -serial "file:$WORK/console" -serial "file:$WORK/status" \
  -virtfs local,path=/,mount_tag=hostroot,security_model=none,readonly=on,multidevs=remap \
  -drive "file=$WORK/scratch.img,format=raw,if=virtio" \
  </dev/null &
QEMU_PID=$!
# Stream the console as it comes (tail exits once qemu has and the rest is printed).
tail -n +1 -s 0.2 --pid="$QEMU_PID" -f "$WORK/console" | sed -u "s/\r//g" &
TAIL_PID=$!
qrc=0
wait "$QEMU_PID" || qrc=$?
QEMU_PID=""
wait "$TAIL_PID" || true
TAIL_PID=""

if ((qrc == 124 || qrc == 137)); then
  echo "vmtest: timed out after ${LOUPE_VMTEST_TIMEOUT:-3600}s (LOUPE_VMTEST_TIMEOUT), guest killed" >&2
  exit 124
fi
status=$(tr -dc '0-9\n' <"$WORK/status" | head -n1)
if [[ -z $status ]]; then
  echo "vmtest: the guest ended without reporting a status (qemu exit $qrc): see its console above" >&2
  exit 125
fi
exit "$status"
