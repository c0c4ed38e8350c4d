#!/usr/bin/env bash
# Installs missing Debian packages, then configures and builds loupe into ./build.
set -euo pipefail
cd "$(dirname "$0")/.."
./scripts/install-deps.sh
cmake --preset default >/dev/null
cmake --build --preset default -j "$(nproc)"
