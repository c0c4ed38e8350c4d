#!/usr/bin/env bash
# Installs missing Debian packages, then configures and builds loupe into ./build.
set -euo pipefail
cd "$(dirname "$0")/.."
# Plugins in group/world-writable directories are refused (docs/reliability.md): build with
# the usual 022 even where the caller runs with a looser umask.
umask 022
./scripts/install-deps.sh
cmake --preset default >/dev/null
cmake --build --preset default -j "$(nproc)"
