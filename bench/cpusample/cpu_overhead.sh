#!/bin/bash
# Overhead of on-CPU sampling at 99 Hz on one CPU-bound workload, in one run:
# no profiler, loupe cpusample (user + kernel stacks), `perf record -F 99 -g` and bpftrace
# `profile:hz:99 { @[kstack, ustack] = count(); }`. Each round runs every variant once
# (interleaved, so drift hits all alike); the median elapsed time per variant is reported
# with its slowdown against the baseline, plus loupe's BPF run time per sample.
#
#   bench/cpusample/cpu_overhead.sh BUILD_DIR [ROUNDS=5] [MILLIONS=400]
set -euo pipefail
build=${1:?usage: cpu_overhead.sh BUILD_DIR [ROUNDS] [MILLIONS]}
rounds=${2:-5}
work=${3:-400}
loupe=$build/bin/loupe
spin=$(mktemp -d)/cpu_spin
src=$(cd "$(dirname "$0")/../.." && pwd)
gcc -O1 -fno-omit-frame-pointer -o "$spin" "$src/plugins/cpusample/tests/cpu_spin.c"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp" "$(dirname "$spin")"' EXIT
cat > "$tmp/cpu.toml" <<TOML
[session]
output_dir = "$tmp/out"
[[plugins]]
name = "cpusample"
frequency = 99
[[sinks]]
name = "folded"
TOML
mountpoint -q /sys/kernel/tracing || mount -t tracefs nodev /sys/kernel/tracing

elapsed() { grep -o 'elapsed [0-9.]*' | awk '{print $2}'; }
declare -A times
for ((r = 0; r < rounds; r++)); do
  times[base]+="$("$spin" "$work" fixed | elapsed) "
  times[loupe]+="$("$loupe" run "$tmp/cpu.toml" -- "$spin" "$work" fixed 2>/dev/null | elapsed) "
  times[perf]+="$(perf record -q -F 99 -g -a -o "$tmp/perf.data" -- "$spin" "$work" fixed 2>/dev/null | elapsed) "
  times[bpftrace]+="$(bpftrace -q -e 'profile:hz:99 { @[kstack, ustack] = count(); }' -c "$spin $work fixed" 2>/dev/null | elapsed) "
done
median() { tr ' ' '\n' | grep . | sort -n | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }
base=$(echo "${times[base]}" | median)
printf '%-10s %10s %9s   (median of %d, %s M iterations)\n' variant elapsed_s overhead "$rounds" "$work"
for v in base loupe perf bpftrace; do
  m=$(echo "${times[$v]}" | median)
  printf '%-10s %10s %8.2f%%   all: %s\n' "$v" "$m" "$(echo "($m - $base) * 100 / $base" | bc -l)" "${times[$v]}"
done

# BPF run time per sample of cs_sample (statistics on while loupe runs), read while the
# session still runs: 4 s of spinning, read after 3 (the timed runs above can end in well
# under a second, and then there was nothing left to read).
"$(dirname "$0")/../common/with_bpf_stats.py" "$loupe" run "$tmp/cpu.toml" -- "$spin" 4 user \
  >/dev/null 2>&1 &
lp=$!
sleep 3
stats=$(bpftool prog show name cs_sample 2>/dev/null | grep -o 'run_time_ns [0-9]* run_cnt [0-9]*' || true)
wait $lp || true
[[ -n $stats ]] || { echo "cpu_overhead: no cs_sample program ran (see loupe run $tmp/cpu.toml)" >&2; exit 1; }
awk '{t += $2; c += $4} END {if (c) printf "cs_sample: %d runs, %.0f ns per sample (user + kernel stack + hash update)\n", c, t / c}' <<<"$stats"
