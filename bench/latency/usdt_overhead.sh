#!/usr/bin/env bash
# Cost per USDT pair: P back-to-back loupe:req__start / loupe:req__done probe pairs in
# tests/workloads/usdt_workload, timed by the workload itself, under
#   none          nothing attached (the probes are nops)
#   empty         bpftrace with empty actions on both probes (the uprobe traps alone)
#   bpftrace      bpftrace's usual pair: start map per tid, hist() of the delta
#   loupe         the latency plugin's usdt_entry/usdt_exit target
#   loupe-label   the same with the probe argument as a label (label_arg = 0)
# every variant once per round, rotated, median of ROUNDS. Root only.
#
#   bench/latency/usdt_overhead.sh BUILD_DIR [ROUNDS=5] [PAIRS=20000]
set -euo pipefail
BUILD=$(cd "${1:?usage: usdt_overhead.sh BUILD_DIR [ROUNDS] [PAIRS]}" && pwd)
ROUNDS=${2:-5}
PAIRS=${3:-20000}
W=$BUILD/tests/workloads/usdt_workload
LOUPE=$BUILD/bin/loupe
[[ $(id -u) -eq 0 ]] || { echo "root only"; exit 1; }
mountpoint -q /sys/kernel/tracing || mount -t tracefs nodev /sys/kernel/tracing
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

profile() {  # $1 = extra target keys
  cat >"$tmp/p.toml" <<TOML
[session]
output_dir = "$tmp/out"
[[plugins]]
name = "latency"
  [[plugins.targets]]
  name = "req"
  usdt_entry = "$W:loupe:req__start"
  usdt_exit = "$W:loupe:req__done"
  $1
[[sinks]]
name = "jsonl"
TOML
}

# Runs the workload under variant $1; prints its ns per pair.
run() {
  local out
  case $1 in
    none) out=$("$W" 0 0 "$PAIRS") ;;
    empty | bpftrace)
      local prog='usdt:'$W':loupe:req__start {} usdt:'$W':loupe:req__done {}'
      [[ $1 == bpftrace ]] && prog='usdt:'$W':loupe:req__start { @s[tid] = nsecs; }
        usdt:'$W':loupe:req__done /@s[tid]/ { @ns = hist(nsecs - @s[tid]); delete(@s[tid]); }'
      out=$(bpftrace -q -e "$prog" -c "$W 0 0 $PAIRS" 2>/dev/null) ;;
    loupe) profile ""; out=$("$LOUPE" run "$tmp/p.toml" -- "$W" 0 0 "$PAIRS" 2>/dev/null) ;;
    loupe-label) profile "label_arg = 0"; out=$("$LOUPE" run "$tmp/p.toml" -- "$W" 0 0 "$PAIRS" 2>/dev/null) ;;
  esac
  awk '/^ns_per_pair/ {print $2}' <<<"$out"
}

variants=(none empty bpftrace loupe loupe-label)
declare -A res
for ((r = 0; r < ROUNDS; r++)); do
  for ((i = 0; i < ${#variants[@]}; i++)); do
    v=${variants[$(((i + r) % ${#variants[@]}))]}
    res[$v]+="$(run "$v") "
  done
done
median() { tr ' ' '\n' | grep -v '^$' | sort -g | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }
echo "USDT pair cost, $PAIRS pairs x $ROUNDS rounds (median), kernel $(uname -r), load $(cut -d' ' -f1 /proc/loadavg)"
printf "%-12s %12s %14s\n" variant ns/pair "x empty"
empty=$(median <<<"${res[empty]}")
for v in "${variants[@]}"; do
  m=$(median <<<"${res[$v]}")
  printf "%-12s %12.1f %14.2f\n" "$v" "$m" "$(awk -v a="$m" -v b="$empty" 'BEGIN {print (b > 0) ? a / b : 0}')"
done
