#!/usr/bin/env bash
# README command 1: install, build, and profile the bundled demo workload with the default
# profile; the console sink prints the report, loupe-out/records.jsonl holds every record.
set -euo pipefail
cd "$(dirname "$0")/.."
./scripts/build.sh
SUDO=""
if [[ $(id -u) -ne 0 ]]; then SUDO="sudo"; fi
$SUDO ./build/bin/loupe check
$SUDO ./build/bin/loupe run profiles/default.toml -- ./build/bin/loupe-demo "${1:-3}"
