#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
#
# What an outlier's user stack costs in the kernel under each unwind mode: every call is an
# outlier (outlier_ns = 1) and the exit program's run time (BPF statistics, --stats) is
# divided by the outliers; the difference with outlier_stacks = false is the stacks' cost
# (the kernel stack is taken in every mode). Two Debian binaries without frame pointers:
#   dd       32 KiB reads of a cached file (syscall = "read": a shallow stack, 5 frames)
#   python3  32 KiB os.pread in a loop (syscall = "pread64": ~20 frames through the interpreter)
# Median of ROUNDS runs each.
#
#   bench/latency/outlier_stack_cost.sh BUILD_DIR [ROUNDS=3] [CALLS=2000]
set -uo pipefail
. "$(dirname "$0")/../common/timing.sh"
compare_setup "${1:-}" latency_workload
rounds=${2:-3}
calls=${3:-2000}
pread_workloads "$calls"
declare -A sys=([dd]=read [python3]=pread64)

echo "ns per outlier in the exit program (median of $rounds; every call an outlier):"
printf '%-8s %10s %10s %10s %10s   %s\n' workload "no stacks" fp tables dwarf "stacks: fp / tables / dwarf"
for w in dd python3; do
  declare -A per=()
  for mode in none fp tables dwarf; do
    stacks=true unwind=$mode
    [ "$mode" = none ] && stacks=false unwind=fp
    body="[[plugins]]
name = \"latency\"
outlier_ns = 1
outlier_stacks = $stacks
unwind = \"$unwind\"
  [[plugins.targets]]
  name = \"${sys[$w]}\"
  syscall = \"${sys[$w]}\""
    per[$mode]=$(for _ in $(seq "$rounds"); do
      stack_cost "$loupe" "$tmp" 'lat_tp_exit' outlier "$body" "${cmd[$w]}" |
        awk '$2 > 0 { printf "%d\n", $1 / $2 }'
    done | median)
  done
  printf '%-8s %10s %10s %10s %10s   +%s / +%s / +%s\n' "$w" "${per[none]}" "${per[fp]}" \
    "${per[tables]}" "${per[dwarf]}" $((per[fp] - per[none])) $((per[tables] - per[none])) \
    $((per[dwarf] - per[none]))
done
echo "(dwarf adds the unwind in user space on top: ~4-10 µs per stack, plugins/cpusample)"
