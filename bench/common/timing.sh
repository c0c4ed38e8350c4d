# SPDX-License-Identifier: Apache-2.0
# Sourced by the bench/*/compare.sh scripts: the setup and timing pieces they share.

# compare_setup BUILD_DIR WORKLOAD: sets build, loupe, work (BUILD_DIR's tests/workloads/
# WORKLOAD) and tmp (removed on exit, with any peer still running), and mounts tracefs
# when it is absent (the peers need it).
compare_setup() {
  build=$(cd "${1:?usage: compare.sh BUILD_DIR}" && pwd)
  loupe=$build/bin/loupe
  work=$build/tests/workloads/$2
  tmp=$(mktemp -d)
  trap 'rm -rf "$tmp"; kill $(jobs -p) 2>/dev/null' EXIT
  [ -d /sys/kernel/tracing/events ] || mount -t tracefs nodev /sys/kernel/tracing 2>/dev/null
  return 0
}

# have CMD: CMD is on PATH.
have() { command -v "$1" >/dev/null; }

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
  median_of_5 "$measure"
  kill -INT $p 2>/dev/null
  wait $p 2>/dev/null
}

# Runs per median: 5; 1 in the smoke mode (LOUPE_BENCH_SMOKE=1, ctest's label `bench`),
# which shows a script still runs, not what anything costs.
runs() { [[ ${LOUPE_BENCH_SMOKE:-0} == 1 ]] && echo 1 || echo 5; }
# median_of_5 MEASURE: the median of 5 runs of MEASURE (a function printing one number).
median_of_5() { for _ in $(seq "$(runs)"); do "$1"; done | median; }

# measure_under_loupe LOUPE PROFILE DIVISOR COMMAND: the median of 5 runs of COMMAND (a
# shell command line) as loupe's target under PROFILE, each its elapsed ns / DIVISOR,
# timed inside the target so loupe's own start and report are not counted.
measure_under_loupe() {
  local loupe=$1 profile=$2 divisor=$3 cmd=$4
  for _ in $(seq "$(runs)"); do
    "$loupe" run "$profile" -- sh -c "t0=\$(date +%s%N); $cmd >/dev/null; t1=\$(date +%s%N); echo per=\$(((t1 - t0) / $divisor))" 2>&1 |
      sed -n 's/^per=//p'
  done | median
}

# stack_cost LOUPE DIR PROGRAM EVENT PLUGIN_BODY CMD: runs the shell command line CMD as
# loupe's target with the plugin section PLUGIN_BODY and --stats, and prints
# "RUN_NS EVENTS RUNS": the kernel's run time of the programs named PROGRAM (a regex), the
# EVENT records (event name) and the program runs. Costs per event of two stack modes are
# then the difference of their RUN_NS over EVENTS, from BPF statistics, not wall time.
stack_cost() {
  local loupe=$1 dir=$2 prog=$3 event=$4 body=$5 cmd=$6
  rm -rf "$dir/out"
  printf '[session]\noutput_dir = "%s/out"\n%s\n[[sinks]]\nname = "jsonl"\n' "$dir" "$body" \
    >"$dir/cost.toml"
  "$loupe" run "$dir/cost.toml" --stats -- sh -c "$cmd" >"$dir/cost.log" 2>&1 ||
    { cat "$dir/cost.log" >&2; return 1; }
  python3 - "$dir/out/records.jsonl" "$prog" "$event" <<'PY'
import json, re, sys
ns = runs = events = 0
for line in open(sys.argv[1]):
    r = json.loads(line)
    if r["kind"] == "event" and r["name"] == sys.argv[3]: events += 1
    if r.get("is_final") and r["kind"] == "metric" and re.fullmatch(sys.argv[2], r["labels"].get("program", "")):
        if r["name"] == "probe_run_time": ns += r["metric"]["value"]
        if r["name"] == "probe_runs": runs += r["metric"]["value"]
print(int(ns), events, int(runs))
PY
}

# Two Debian binaries without frame pointers reading CALLS x 32 KiB of a cached file in
# "$tmp": dd (read, a shallow stack) and python3 (os.pread through the interpreter). Sets
# the associative array cmd[dd], cmd[python3]; for the stack-cost benches.
pread_workloads() {
  local calls=$1
  head -c $((32768 * calls)) /dev/zero >"$tmp/data"
  cat "$tmp/data" >/dev/null
  declare -gA cmd=(
    [dd]="dd if=$tmp/data of=/dev/null bs=32k count=$calls status=none"
    [python3]="python3 -c 'import os
fd = os.open(\"$tmp/data\", os.O_RDONLY)
for _ in range($calls): os.pread(fd, 32768, 0)'"
  )
}
