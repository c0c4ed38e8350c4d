#!/usr/bin/env bash
# README command 1: install what the demo needs, build the CLI, the plugins, the sinks and
# the demo (not the tests or the benchmarks: command 2 builds those), and profile the
# bundled demo workload with the default profile; the console sink prints the report,
# loupe-out/records.jsonl holds every record.
#
# The build packages only (no qemu, peers, JDK, Chromium, Prometheus), and the `demo`
# preset (CMakePresets.json): 4 min on 2 CPUs from a fresh clone, against 9 for everything.
# It shares build/ with command 2, which adds what the demo left out.
set -euo pipefail
cd "$(dirname "$0")/.."
umask 022
LOUPE_WITH_VMTEST=0 LOUPE_WITH_PEERS=0 LOUPE_WITH_TEST_TOOLS=0 ./scripts/install-deps.sh
cmake --preset demo >/dev/null
cmake --build --preset demo -j "$(nproc)"
SUDO=""
if [[ $(id -u) -ne 0 ]]; then SUDO="sudo"; fi
$SUDO ./build/bin/loupe check
$SUDO ./build/bin/loupe run profiles/default.toml -- ./build/bin/loupe-demo "${1:-3}"
