#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
#
# offcpu beside libbpf-tools' offcputime and runqlat on the same run, and its cost per
# context switch beside offcputime's.
#
#   bench/offcpu/compare.sh BUILD_DIR
#
# 1. Same run: offcputime and runqlat -P are started system-wide, then loupe runs the
#    offcpu profile on `offcpu_workload blockers` and on a crowd (3 threads spinning on
#    CPU 0) beside a lone spinner; each tool's time per blocking function (offcputime's
#    stacks by function name) and run-queue waits of the crowd are printed side by side
#    with the workload's own figures.
# 2. Cost: a pipe ping-pong between two threads on one CPU (2 switches per round trip),
#    timed with nothing attached, under loupe's offcpu (wakers on, then off, then off-CPU
#    stacks alone: run_queue = false, walked by tables and by frame pointers as offcputime
#    walks them) and under offcputime, then offcputime and runqlat -P together (the
#    function set of offcpu without wakers); ns added per round trip, median of 5 rounds,
#    each round every mode once in turn, all in this one run.
# 3. User stacks by the in-kernel unwinder's tables vs frame pointers: the same ping-pong,
#    now the session's target (tables are loaded for the processes loupe follows), under
#    offcpu with unwind = "fp" and "tables" (wakers off); ns added per round trip beside
#    the ping-pong alone, median of 5 runs each.
# Root only; a peer absent from PATH is reported as absent.
set -uo pipefail
. "$(dirname "$0")/../common/timing.sh"
compare_setup "${1:-}" offcpu_workload

profile() {  # profile FILE [extra plugin keys]
  cat >"$1" <<TOML
[session]
output_dir = "$tmp/out"
[[plugins]]
name = "offcpu"
${2:-}
[[sinks]]
name = "jsonl"
TOML
}

# ---- 1. the same run ---------------------------------------------------------------
profile "$tmp/p.toml"
# Each peer watches only its own part (offcputime is system-wide: one comm, one run).
peer=""
if have offcputime; then offcputime 30 >"$tmp/offcputime.txt" 2>&1 & peer=$!; sleep 2; fi
"$loupe" run "$tmp/p.toml" -- "$work" blockers >"$tmp/blockers.out" 2>&1
cp "$tmp/out/records.jsonl" "$tmp/blockers.jsonl"
[ -n "$peer" ] && { kill -INT "$peer"; wait "$peer"; }
peer=""
if have runqlat; then runqlat -P 30 1 >"$tmp/runqlat.txt" 2>&1 & peer=$!; sleep 2; fi
"$loupe" run "$tmp/p.toml" -- sh -c "'$work' crowd 1.5 & '$work' lone 1.5 & wait" >"$tmp/crowd.out" 2>&1
cp "$tmp/out/records.jsonl" "$tmp/crowd.jsonl"
[ -n "$peer" ] && { kill -INT "$peer"; wait "$peer"; }

python3 - "$tmp" <<'PY'
import json, re, sys, collections
tmp = sys.argv[1]
out = open(f"{tmp}/blockers.out").read()
own = {k: int(v) / 1e6 for k, v in re.findall(r"(sleep_ns|read_ns|vfork_ns)=(\d+)", out)}
fns = {"sleep_in_sleeper": "sleep_ns", "read_in_reader": "read_ns", "wait_in_vfork": "vfork_ns"}
loupe = collections.Counter()
for line in open(f"{tmp}/blockers.jsonl"):
    r = json.loads(line)
    if r["kind"] != "stack" or r["name"] != "offcpu" or not r["is_final"]: continue
    if r["labels"].get("comm") != "offcpu_workload": continue
    if r["labels"]["reason"] not in ("sleep", "uninterruptible"): continue
    syms = {f.get("symbol") for f in r["stack"]["frames"]}
    ns = next(v["value"] for v in r["stack"]["values"] if v["name"] == "offcpu_ns")
    for fn in fns:
        if fn in syms and (fn != "wait_in_vfork" or r["labels"]["reason"] == "uninterruptible"):
            loupe[fn] += ns / 1e6
# offcputime symbolizes user stacks at its end, when the workload has exited: they come
# out empty (the problem loupe's mmap records solve), so the peers are compared by kernel
# path, every thread of the workload's comm on both sides.
paths = {"nanosleep": "do_nanosleep", "pipe read": "pipe_read", "vfork wait": "kernel_clone"}
def kernel_path(frames):
    for name, fn in paths.items():
        if any(f and (f == fn or f == "anon_" + fn) for f in frames): return name
    return None
lk, pk = collections.Counter(), collections.Counter()
for line in open(f"{tmp}/blockers.jsonl"):
    r = json.loads(line)
    if r["kind"] != "stack" or r["name"] != "offcpu" or not r["is_final"]: continue
    if r["labels"].get("comm") != "offcpu_workload": continue
    path = kernel_path([f.get("symbol") for f in r["stack"]["frames"]])
    if path: lk[path] += next(v["value"] for v in r["stack"]["values"] if v["name"] == "offcpu_ns") / 1e6
peer_state = ""
try:
    for block in open(f"{tmp}/offcputime.txt").read().split("\n\n"):
        lines = [l.strip() for l in block.strip().splitlines()]
        if len(lines) < 2 or "offcpu_workload" not in lines[-2] or not lines[-1].isdigit(): continue
        path = kernel_path(lines[:-2])
        if path: pk[path] += int(lines[-1]) / 1e3
except FileNotFoundError:
    peer_state = " (offcputime absent)"
print(f"{'blocking function':22} {'workload':>10} {'loupe':>10}  (ms)")
for fn, key in fns.items():
    print(f"{fn:22} {own.get(key, 0):10.1f} {loupe[fn]:10.1f}")
print(f"{'kernel path (all threads)':26} {'loupe':>10} {'offcputime':>11}  (ms){peer_state}")
for name in paths:
    print(f"{name:26} {lk[name]:10.1f} {pk[name]:11.1f}")

crowd = re.search(r"crowd_pid=(\d+)", open(f"{tmp}/crowd.out").read())
crowd = crowd.group(1) if crowd else "?"
lc = ls = 0
for line in open(f"{tmp}/crowd.jsonl"):
    r = json.loads(line)
    if r["kind"] == "histogram" and r["name"] == "runq_latency" and r["is_final"] and r["labels"].get("pid") == crowd:
        lc += r["histogram"]["count"]; ls += r["histogram"]["sum"]
rc = 0
try:
    txt = open(f"{tmp}/runqlat.txt").read()
    m = re.search(rf"pid = {crowd}\b(.*?)(?:\n\s*\n|\Z)", txt, re.S)
    if m:
        for lo, hi, n in re.findall(r"(\d+) -> (\d+)\s*:\s*(\d+)", m.group(1)):
            rc += int(n)
except FileNotFoundError:
    pass
print(f"crowd (3 threads on CPU 0, 1.5 s): loupe {lc} run-queue waits ({ls/1e6:.0f} ms); "
      f"runqlat -P {rc} waits")
PY

# ---- 2. cost per context switch ------------------------------------------------------
# A pipe ping-pong between two threads on CPU 0; prints pingpong_ns=<ns per round trip>.
# `pingpong.py settle` first sleeps 0.5 s (a session following it loads its tables then).
cat >"$tmp/pingpong.py" <<'PY'
import os, sys, threading, time
if sys.argv[1:] == ["settle"]:
    time.sleep(0.5)
n = 20000 if os.environ.get("LOUPE_BENCH_SMOKE") == "1" else 200000
a, b = os.pipe(), os.pipe()
os.sched_setaffinity(0, {0})
def partner():
    os.sched_setaffinity(0, {0})
    for _ in range(n):
        os.read(a[0], 1); os.write(b[1], b"x")
t = threading.Thread(target=partner); t.start()
t0 = time.perf_counter_ns()
for _ in range(n):
    os.write(a[1], b"x"); os.read(b[0], 1)
t1 = time.perf_counter_ns()
t.join()
print(f"pingpong_ns={(t1 - t0) / n:.0f}")
PY
pingpong() { python3 "$tmp/pingpong.py" | sed -n 's/^pingpong_ns=//p'; }
median() { sort -n | awk '{a[NR]=$1} END {print (NR % 2) ? a[(NR+1)/2] : (a[NR/2] + a[NR/2+1]) / 2}'; }
profile "$tmp/all.toml" "wakers = true"
profile "$tmp/nowake.toml" "wakers = false"
# offcputime's function set: off-CPU stacks only (no run queue, no wakers, no sched_waking);
# with unwind = "fp" its stack walk too (offcputime's bpf_get_stackid), so the two differ
# by nothing but the programs; the default walk (tables) is the price of whole stacks
# through code without frame pointers, which section 3 shows apart.
profile "$tmp/stacks.toml" $'wakers = false\nrun_queue = false'
profile "$tmp/stacks_fp.toml" $'wakers = false\nrun_queue = false\nunwind = "fp"'
profile "$tmp/nowake_fp.toml" $'wakers = false\nunwind = "fp"'
# One mode: what attaches (nothing for `none`). Every round runs each mode once, in turn,
# so a neighbour's burst or a drift of the machine falls on every mode alike; the median
# of the rounds is printed.
attach() {  # attach MODE: starts it in the background, its pids in $pids
  local q=(--duration 60)
  pids=""
  case $1 in
    none) return ;;
    loupe_wakers) "$loupe" run "$tmp/all.toml" "${q[@]}" >/dev/null 2>&1 & ;;
    loupe_no_wakers) "$loupe" run "$tmp/nowake.toml" "${q[@]}" >/dev/null 2>&1 & ;;
    loupe_stacks) "$loupe" run "$tmp/stacks.toml" "${q[@]}" >/dev/null 2>&1 & ;;
    loupe_stacks_fp) "$loupe" run "$tmp/stacks_fp.toml" "${q[@]}" >/dev/null 2>&1 & ;;
    loupe_no_wakers_fp) "$loupe" run "$tmp/nowake_fp.toml" "${q[@]}" >/dev/null 2>&1 & ;;
    offcputime) offcputime 60 >/dev/null 2>&1 & ;;
    offcputime+runqlat)
      offcputime 60 >/dev/null 2>&1 &
      pids=$!
      runqlat -P 60 1 >/dev/null 2>&1 &
      ;;
  esac
  pids="$pids $!"
  sleep 3
}
modes="none loupe_wakers loupe_no_wakers loupe_no_wakers_fp loupe_stacks loupe_stacks_fp"
have offcputime && modes="$modes offcputime"
# loupe_no_wakers' function set from the peers: off-CPU stacks and run-queue latency.
have offcputime && have runqlat && modes="$modes offcputime+runqlat"
for _ in $(seq "$(runs)"); do
  for m in $modes; do
    attach "$m"
    echo "$m $(pingpong)"
    [ -n "$pids" ] && { kill -INT $pids 2>/dev/null; wait $pids 2>/dev/null; }
  done
done >"$tmp/rounds.txt"
for m in $modes; do
  echo "$m $(awk -v m="$m" '$1 == m {print $2}' "$tmp/rounds.txt" | median)"
done >"$tmp/cost.txt"
awk 'NR == 1 {base = $2} {printf "%-19s %8.0f ns per round trip (2 switches)  +%6.0f ns  x%.2f\n", $1, $2, $2 - base, $2 / base}' "$tmp/cost.txt"
# The issue's comparisons, on the added ns: each of offcpu's function sets against the peers
# that do the same.
awk 'NR == 1 {base = $2} {add[$1] = $2 - base}
     function ratio(a, b) { if ((a in add) && (b in add) && add[b] > 0)
                              printf "  %s / %s: %.2fx added ns\n", a, b, add[a] / add[b] }
     END { ratio("loupe_stacks_fp", "offcputime"); ratio("loupe_stacks", "offcputime");
           ratio("loupe_no_wakers_fp", "offcputime+runqlat");
           ratio("loupe_no_wakers", "offcputime+runqlat") }' "$tmp/cost.txt"

# ---- 3. unwind = "tables" vs "fp", the ping-pong as the target ------------------------
profile "$tmp/fp.toml" $'wakers = false\nunwind = "fp"'
profile "$tmp/tables.toml" $'wakers = false\nunwind = "tables"'
profile "$tmp/tables_stacks.toml" $'wakers = false\nunwind = "tables"\nrun_queue = false'
as_target() {  # as_target LABEL [profile]: the ping-pong run 5 times, median ns per round trip
  local label=$1 m
  m=$(for _ in $(seq "$(runs)"); do
        if [ $# -gt 1 ]; then "$loupe" run "$2" -- python3 "$tmp/pingpong.py" settle 2>/dev/null
        else python3 "$tmp/pingpong.py" settle; fi | sed -n 's/^pingpong_ns=//p'
      done | median)
  echo "$label $m"
}
{
  as_target none
  as_target offcpu_fp "$tmp/fp.toml"
  as_target offcpu_tables "$tmp/tables.toml"
  as_target tables_stacks "$tmp/tables_stacks.toml"
} >"$tmp/tables.txt"
echo "the ping-pong as the target (offcpu, wakers off):"
awk 'NR == 1 {base = $2} {printf "%-19s %8.0f ns per round trip (2 switches)  +%6.0f ns  x%.2f\n", $1, $2, $2 - base, $2 / base}' "$tmp/tables.txt"
