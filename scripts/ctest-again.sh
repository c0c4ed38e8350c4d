#!/usr/bin/env bash
# ctest, then once more for the tests that failed, said aloud: a real-kernel test that failed
# once beside a loaded machine and passes alone is named here ("FAILED ONCE") for a person to
# look at; one that fails twice fails the run. Arguments: what ctest is given.
#
#   scripts/ctest-again.sh --preset default -j 2
#   scripts/ctest-again.sh --test-dir build -L kernel -j 2 --output-on-failure
set -uo pipefail
dir=build
args=("$@")
for ((i = 0; i < ${#args[@]}; i++)); do
  [[ ${args[i]} == --test-dir ]] && dir=${args[i + 1]}
done
# ctest rewrites the list only when something failed: an old one must not be taken for it.
failed="$dir/Testing/Temporary/LastTestsFailed.log"
rm -f "$failed"
ctest "$@" && exit 0
if [[ ! -s $failed ]]; then
  echo "ctest-again: ctest failed and listed no failed test: not run again"
  exit 1
fi
echo "===== FAILED ONCE, run again alone: $(cut -d: -f2 "$failed" | tr '\n' ' ') ====="
# -j 1: alone, so a test that needs the machine to itself gets it.
ctest "$@" -j 1 --rerun-failed --output-on-failure
rc=$?
if [[ $rc -eq 0 ]]; then
  echo "===== FAILED ONCE, PASSED ALONE: $(cut -d: -f2 "$failed" | tr '\n' ' ') ====="
else
  echo "===== FAILED TWICE ====="
fi
exit $rc
