#!/usr/bin/env bash
# README command 2: install, build, and run every test (unit, dlopen, real kernel, CLI),
# then the kernel tier again inside Debian's stock 6.1 and 6.12 kernels (scripts/vmtest.sh):
# a profiler is done when it loads and passes on every kernel of the matrix, not on this one.
# Real-kernel tests need root; without it they skip and say why.
#
#   LOUPE_SKIP_MATRIX=1   skip the guests (quick local runs; CI never sets it)
#   LOUPE_MATRIX="6.1 6.12"  the kernels of the matrix
# Extra arguments go to the host ctest run. A test that fails is run once more, alone
# (scripts/ctest-again.sh): the output names it either way, and only twice fails the run.
set -euo pipefail
cd "$(dirname "$0")/.."
# Each phase says how long it took: CI has 35 minutes, and this is where a reader looks first.
t0=$SECONDS
./scripts/build.sh
echo "===== build: $((SECONDS - t0)) s ====="
SUDO=""
if [[ $(id -u) -ne 0 ]]; then SUDO="sudo --preserve-env=GTEST_FILTER,LOUPE_MATRIX,LOUPE_PYTHON_MATRIX,LOUPE_VMTEST_TIMEOUT"; fi

status=0
t0=$SECONDS
$SUDO ./scripts/ctest-again.sh --preset default -j 2 "$@" || status=$?
echo "===== host tests: $((SECONDS - t0)) s ====="

if [[ "${LOUPE_SKIP_MATRIX:-0}" == 1 ]]; then
  echo "kernel matrix: skipped (LOUPE_SKIP_MATRIX=1)"
  exit $status
fi
# Both guests at once: single-threaded TCG keeps one host core busy per guest. Each guest's
# output goes to its own log, printed whole when it ends, so the two never interleave.
# LOUPE_MATRIX_GTEST_FILTER narrows the guests' gtest cases (a local bisect; CI sets none).
if [[ -n "${LOUPE_MATRIX_GTEST_FILTER:-}" ]]; then export GTEST_FILTER="$LOUPE_MATRIX_GTEST_FILTER"; fi
# One Python interpreter per process shape in the guests, every version on the host
# (tests/python/python_frames_e2e_test.cpp says why).
# One Python process shape per guest, in turn (tests/python/python_frames_e2e_test.cpp):
# Debian's interpreter in the first kernel, the newest other build in the second.
shapes=(debian newest)
t0=$SECONDS
logs=$(mktemp -d)
trap 'rm -rf "$logs"' EXIT
declare -A pids
i=0
for k in ${LOUPE_MATRIX:-6.1 6.12}; do
  LOUPE_PYTHON_MATRIX=${LOUPE_PYTHON_MATRIX:-${shapes[i++ % 2]}} $SUDO ./scripts/vmtest.sh "$k" ./scripts/ctest-again.sh --test-dir build -L kernel -j 2 --output-on-failure \
    --timeout 600 >"$logs/$k.log" 2>&1 &
  pids[$k]=$!
done
for k in "${!pids[@]}"; do
  rc=0
  wait "${pids[$k]}" || rc=$?
  echo "===== kernel $k: ctest -L kernel exited $rc (matrix at $((SECONDS - t0)) s) ====="
  # The console's boot chatter is long; the test results are what a reader needs.
  sed -n '/Test project/,$p' "$logs/$k.log" || true
  if [[ $rc -ne 0 ]]; then
    echo "----- kernel $k: last 60 lines of the guest console -----"
    tail -n 60 "$logs/$k.log"
    status=1
  fi
done
exit $status
