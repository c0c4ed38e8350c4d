#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
#
# loupe and its peers on the same workloads, in one run, as a ratio table.
#
#   bench/compare/run.sh BUILD_DIR [--quick]
#
# 1. syscall counting: a getppid() loop (sdk/examples/syscount/tests/syscount_workload) timed with no
#    tracer, under loupe's syscount, bpftrace (count() per syscall id) and perf stat
#    (raw_syscalls:sys_enter, kernel counting). Every tracer is system-wide and attached
#    before the timed loop starts; added ns per syscall = (t - t_none) / N, median of rounds.
# 2. `loupe bench` on a syscount profile and on a latency profile (a syscall pair and a
#    libc uprobe pair), then the per-plugin benches that compare against peers in one
#    process: bench/latency (loupe vs empty pair vs floors vs funclatency -p PID vs
#    bpftrace, uprobe and syscall pairs), bench/memalloc (vs bpftrace on malloc/free),
#    bench/biolat (vs biolatency -Q and a bpftrace tracepoint script, O_DIRECT reads) and
#    bench/lockwait (vs empty programs: no peer times futex waits on this kernel).
# Root only. Peers absent from PATH are reported as "absent", not faked.
set -uo pipefail
build=${1:?usage: run.sh BUILD_DIR [--quick]}
quick=${2:-}
build=$(cd "$build" && pwd)
loupe=$build/bin/loupe
work=$build/bin/syscount_workload
calls=3000000
rounds=5
[ "$quick" = --quick ] && { calls=500000; rounds=3; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
[ -d /sys/kernel/tracing/events ] || mount -t tracefs nodev /sys/kernel/tracing 2>/dev/null

now() { date +%s%N; }
time_loop() { local t0 t1; t0=$(now); "$work" "$calls" 0; t1=$(now); echo $((t1 - t0)); }
median() { sort -n | awk '{a[NR]=$1} END {print (NR % 2) ? a[(NR+1)/2] : (a[NR/2] + a[NR/2+1]) / 2}'; }

cat >"$tmp/syscount.toml" <<TOML
[session]
output_dir = "$tmp/out"
[[plugins]]
name = "syscount"
[[sinks]]
name = "jsonl"
TOML

# start_<tool>: starts it in the background (pid in $tpid) and waits until it is attached.
start_loupe() { "$loupe" run "$tmp/syscount.toml" >"$tmp/loupe.log" 2>&1 & tpid=$!; sleep 1.5; }
start_bpftrace() {
  bpftrace -e 'tracepoint:raw_syscalls:sys_enter { @[args->id] = count(); }' >"$tmp/bt.log" 2>&1 & tpid=$!
  for _ in $(seq 100); do grep -q Attaching "$tmp/bt.log" 2>/dev/null && break; sleep 0.1; done; sleep 0.5
}
# Without a command, perf stat -a counts until SIGINT (with one, SIGINT would wait for it).
start_perf() { perf stat -e raw_syscalls:sys_enter -a >"$tmp/perf.log" 2>&1 & tpid=$!; sleep 1; }
stop_tool() { kill -INT "$tpid" 2>/dev/null; wait "$tpid" 2>/dev/null; }

declare -A samples
tools=(none loupe bpftrace perf)
for r in $(seq "$rounds"); do
  # Rotate the order each round so drift and warm-up hit every tool alike.
  for i in 0 1 2 3; do
    tool=${tools[$(((i + r) % 4))]}
    case $tool in
      none) samples[$tool]+="$(time_loop) " ;;
      loupe) start_loupe; samples[$tool]+="$(time_loop) "; stop_tool ;;
      bpftrace) command -v bpftrace >/dev/null || continue; start_bpftrace; samples[$tool]+="$(time_loop) "; stop_tool ;;
      perf) command -v perf >/dev/null || continue; start_perf; samples[$tool]+="$(time_loop) "; stop_tool ;;
    esac
  done
done

echo "## syscall counting: getppid loop, $calls calls, median of $rounds rounds ($(date -u +%F), $(uname -r), $(nproc) CPUs)"
base=$(tr ' ' '\n' <<<"${samples[none]}" | grep . | median)
loupe_added=
printf '%-34s %12s %16s %14s\n' tool "ns/call" "added ns/call" "x loupe added"
for tool in none loupe bpftrace perf; do
  if [ -z "${samples[$tool]:-}" ]; then printf '%-34s %12s\n' "$tool" absent; continue; fi
  med=$(tr ' ' '\n' <<<"${samples[$tool]}" | grep . | median)
  per=$(awk -v t="$med" -v n="$calls" 'BEGIN {printf "%.1f", t / n}')
  added=$(awk -v t="$med" -v b="$base" -v n="$calls" 'BEGIN {printf "%.1f", (t - b) / n}')
  [ "$tool" = loupe ] && loupe_added=$added
  ratio=$(awk -v a="$added" -v l="${loupe_added:-0}" 'BEGIN {if (l > 0) printf "%.2f", a / l; else print "-"}')
  [ "$tool" = none ] && ratio=-
  label=$tool
  case $tool in
    loupe) label="loupe syscount (BPF hash count)" ;;
    bpftrace) label="bpftrace count() per id" ;;
    perf) label="perf stat (kernel counter)" ;;
  esac
  printf '%-34s %12s %16s %14s\n' "$label" "$per" "$added" "$ratio"
done

echo
echo "## loupe bench (the profile's probes vs an empty program on the same hooks)"
"$loupe" bench --reps "$rounds" "$tmp/syscount.toml" 2>/dev/null | sed 1d
# A syscall pair and a libc uprobe pair (the malloc+free loop) of the latency profiler.
cat >"$tmp/latency.toml" <<TOML
[[plugins]]
name = "latency"
[[plugins.targets]]
syscall = "read"
[[plugins.targets]]
ufunc = "libc:malloc"
[[sinks]]
name = "jsonl"
TOML
"$loupe" bench --reps "$rounds" "$tmp/latency.toml" 2>/dev/null | sed 1d

run_bench() {
  local name=$1; shift
  echo; echo "## $name"
  # Each bench stops its own rounds at its time budget and prints what it measured; the
  # outer timeout only catches a hang.
  if [ -x "$build/bin/$name" ]; then timeout 600 "$build/bin/$name" "$@" 2>&1 | tail -n 40
  else echo "($name not built: cmake --build $build --target $name)"; fi
}
if [ "$quick" = --quick ]; then
  run_bench latency_overhead --rounds 3
  run_bench memalloc_overhead --rounds 3 --budget 120
else
  run_bench latency_overhead
  run_bench memalloc_overhead --budget 240
  run_bench biolat_overhead
  run_bench lockwait_overhead
fi
echo
echo "biolatency and bpftrace are compared with biolat inside bench/biolat by BPF run time"
echo "per I/O (wall time per I/O is device noise on this VM); biosnoop needs kprobes or"
echo "fentry, absent here. perf lock contention is compared with lockwait on what it reports"
echo "(plugins/lockwait/README.md), not timed: Debian's perf lacks its BPF mode (-b), and"
echo "perf lock record costs what writing every lock event to perf.data costs."
