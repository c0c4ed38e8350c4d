# SPDX-License-Identifier: Apache-2.0
# Sourced by the bench/*/compare.sh scripts: the timing pieces they share.

# The median of the numbers on stdin, one per line.
median() { sort -n | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }

# measure_beside MEASURE PEER...: starts PEER in the background, gives it 2 s to attach,
# prints the median of 5 runs of MEASURE (a function printing one number), stops PEER.
measure_beside() {
  local measure=$1 p
  shift
  "$@" >/dev/null 2>&1 &
  p=$!
  sleep 2
  for _ in 1 2 3 4 5; do "$measure"; done | median
  kill -INT $p 2>/dev/null
  wait $p 2>/dev/null
}
