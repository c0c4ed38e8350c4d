#!/usr/bin/env bash
# The bounded fuzz smoke run the test suite does (ctest: fuzz_smoke):
#   1. builds the libFuzzer targets with clang into BUILD_DIR/fuzz-sub (once; incremental
#      afterwards, so only the first run after a change pays for compilation),
#   2. replays every committed regression input (a crash found once stays fixed),
#   3. fuzzes each target for FUZZ_SECONDS (default 10) from its committed seed corpus,
#      in a scratch copy under BUILD_DIR/fuzz-work so the source tree is never written.
# Exit 0 = no crash; 1 = a crash (the reproducer is under BUILD_DIR/fuzz-artifacts);
# 77 = clang or libFuzzer absent (ctest reports a skip with the reason).
#
# Usage: run_smoke.sh SOURCE_DIR BUILD_DIR [--build-only] [TARGET...]
# Longer local campaigns: FUZZ_SECONDS=600 tests/fuzz/run_smoke.sh . build fuzz_profile
# The dispatcher target: FUZZ_CMAKE_ARGS=-DLOUPE_FUZZ_DISPATCHER=ON (fresh BUILD/fuzz-sub).
set -uo pipefail

src=${1:?source dir}
build=${2:?build dir}
shift 2
build_only=0
if [[ ${1:-} == --build-only ]]; then build_only=1; shift; fi
targets=("$@")
((${#targets[@]})) || targets=(fuzz_profile fuzz_descriptor fuzz_record fuzz_perf_map fuzz_kallsyms
                                 fuzz_elf_symbols fuzz_jitdump fuzz_plugin_decoders)
seconds=${FUZZ_SECONDS:-10}
fuzz=$src/tests/fuzz
sub=$build/fuzz-sub

cxx=""
for c in clang++-14 clang++; do
  if command -v "$c" >/dev/null; then cxx=$(command -v "$c"); break; fi
done
if [[ -z $cxx ]]; then
  echo "SKIP: no clang++ (scripts/install-deps.sh installs clang and libclang-rt-14-dev)"
  exit 77
fi
if ! echo 'extern "C" int LLVMFuzzerTestOneInput(const char*, unsigned long) { return 0; }' |
    "$cxx" -x c++ -fsanitize=fuzzer -o /dev/null - 2>/dev/null; then
  echo "SKIP: $cxx cannot link libFuzzer (install libclang-rt-14-dev)"
  exit 77
fi

if [[ ! -f $sub/build.ninja ]]; then
  cmake -S "$fuzz/project" -B "$sub" -G Ninja -DCMAKE_CXX_COMPILER="$cxx" -DCMAKE_BUILD_TYPE= \
    -DLOUPE_SOURCE_DIR="$src" ${FUZZ_CMAKE_ARGS:-} >"$build/fuzz-configure.log" 2>&1 ||
    { cat "$build/fuzz-configure.log"; exit 1; }
fi
start=$(date +%s)
cmake --build "$sub" --target "${targets[@]}" || exit 1
echo "fuzz: targets built in $(($(date +%s) - start)) s"
((build_only)) && exit 0

work=$build/fuzz-work
art=$build/fuzz-artifacts
mkdir -p "$art"
status=0
printf '%-18s %10s %8s %8s %7s  %s\n' target execs cov ft corpus result
for t in "${targets[@]}"; do
  bin=$sub/$t
  log=$build/fuzz-$t.log
  # Regressions: each committed input runs once; any sanitizer report fails the test.
  regs=()
  if [[ -d $fuzz/regressions/$t ]]; then
    while IFS= read -r -d '' f; do regs+=("$f"); done < <(find "$fuzz/regressions/$t" -type f -print0)
  fi
  if ((${#regs[@]})); then
    if ! "$bin" -runs=1 "${regs[@]}" >"$log.regressions" 2>&1; then
      echo "$t: a regression input crashes again:"; tail -40 "$log.regressions"; status=1; continue
    fi
  fi
  rm -rf "${work:?}/$t"
  mkdir -p "$work/$t"
  # -runs bounds a target that is faster than expected; -rss_limit_mb and -timeout turn
  # a memory blow-up or a hang into a reported failure instead of a stuck test.
  "$bin" -max_total_time="$seconds" -runs=5000000 -timeout=10 -rss_limit_mb=1024 -max_len=16384 \
    -print_final_stats=1 -artifact_prefix="$art/$t-" "$work/$t" "$fuzz/corpus/$t" >"$log" 2>&1
  rc=$?
  execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log")
  last=$(grep -E '^#[0-9]+' "$log" | tail -1)
  cov=$(sed -n 's/.* cov: \([0-9]*\).*/\1/p' <<<"$last")
  ft=$(sed -n 's/.* ft: \([0-9]*\).*/\1/p' <<<"$last")
  corp=$(sed -n 's/.* corp: \([0-9]*\)\/.*/\1/p' <<<"$last")
  result=ok
  if ((rc != 0)); then
    result="CRASH (rc $rc, see $log and $art)"
    status=1
  fi
  printf '%-18s %10s %8s %8s %7s  %s (%d regressions replayed)\n' "$t" "${execs:-?}" "${cov:-?}" "${ft:-?}" "${corp:-?}" \
    "$result" "${#regs[@]}"
  if ((rc != 0)); then grep -E 'ERROR|SUMMARY|runtime error|Assertion|#[0-9]+ 0x.* in ' "$log" | head -30; fi
done
exit $status
