#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
#
# What a slow event's user stack costs in the kernel under each unwind mode: with
# slow_us = 1 every file call is a slow event, and the exit program's run time (BPF
# statistics, --stats) over the events is compared between unwind = "fp", "tables" and
# "dwarf", and slow_us = 0 (no events: the accounting alone). Two Debian binaries without
# frame pointers:
#   dd       32 KiB reads of a cached file (a shallow stack, 5 frames)
#   python3  32 KiB os.pread in a loop (~20 frames through the interpreter)
# Median of ROUNDS runs each.
#
#   bench/fileio/slow_stack_cost.sh BUILD_DIR [ROUNDS=3] [CALLS=2000]
set -uo pipefail
. "$(dirname "$0")/../common/timing.sh"
compare_setup "${1:-}" fileio_workload
rounds=${2:-3}
calls=${3:-2000}
pread_workloads "$calls"

echo "ns per slow event in fio_exit (median of $rounds; every file call an event):"
printf '%-8s %7s %10s %10s %10s   %s\n' workload events fp tables dwarf "over no events: fp / tables / dwarf"
for w in dd python3; do
  declare -A per=()
  events=0
  for mode in fp tables dwarf none; do
    slow=1 unwind=$mode
    [ "$mode" = none ] && slow=0 unwind=fp
    body="[[plugins]]
name = \"fileio\"
slow_us = $slow
unwind = \"$unwind\""
    # "none" has no events: its run time is divided by the fp run's events.
    per[$mode]=$(for _ in $(seq "$rounds"); do
      stack_cost "$loupe" "$tmp" 'fio_exit' file_slow "$body" "${cmd[$w]}" |
        awk -v ev="$events" '{ n = $2 > 0 ? $2 : ev; if (n > 0) printf "%d %d\n", $1 / n, n }'
    done | sort -n | awk '{a[NR]=$0} END {print a[int((NR+1)/2)]}')
    [ "$mode" = none ] || events=${per[$mode]#* }
    per[$mode]=${per[$mode]%% *}
  done
  printf '%-8s %7s %10s %10s %10s   +%s / +%s / +%s\n' "$w" "$events" "${per[fp]}" \
    "${per[tables]}" "${per[dwarf]}" $((per[fp] - per[none])) $((per[tables] - per[none])) \
    $((per[dwarf] - per[none]))
done
echo "(dwarf adds the unwind in user space on top: ~4-10 µs per stack, plugins/cpusample)"
