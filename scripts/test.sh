#!/usr/bin/env bash
# README command 2: install, build, and run every test (unit, dlopen, real kernel, CLI).
# Real-kernel tests need root; without it they skip and say why.
set -euo pipefail
cd "$(dirname "$0")/.."
./scripts/build.sh
SUDO=""
if [[ $(id -u) -ne 0 ]]; then SUDO="sudo"; fi
$SUDO ctest --preset default -j 2 "$@"
