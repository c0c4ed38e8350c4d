#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
#
# What Python frames cost cpusample per sample, and what their names hold in user space.
#
#   bench/cpusample/python_cost.sh BUILD_DIR [ROUNDS=5] [PYTHON=/usr/bin/python3.11]
#
# Each round runs tests/python/workload.py's CPU mode (heavy() and light(), 4-5 Python
# frames a stack) for 2 s under cpusample at 999 Hz with --stats twice, python_frames on
# and off, in alternating order so drift hits both. Per run: the sampling program's BPF run
# time (the kernel's own stats) over the samples taken in the target. Printed: the median
# per sample of each, their difference (the Python walk's cost), frames per stack, and the
# code objects named with the bytes their names, files and line tables hold.
# Runs where it is started: on the host, or inside a guest (scripts/vmtest.sh K bench/...);
# an emulated guest's absolute µs are the emulator's, its on/off ratio is still the walk's.
set -euo pipefail
build=$(cd "${1:?usage: python_cost.sh BUILD_DIR [ROUNDS] [PYTHON]}" && pwd)
rounds=${2:-5}
python=${3:-/usr/bin/python3.11}
src=$(cd "$(dirname "$0")/../.." && pwd)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

run() {  # run on|off: prints "ns_per_sample frames_per_stack codes kib"
  local py=$1 out=$tmp/$1.jsonl
  cat >"$tmp/p.toml" <<TOML
[[plugins]]
name = "cpusample"
frequency = 999
python_frames = $([[ $py == on ]] && echo true || echo false)
[[sinks]]
name = "jsonl"
path = "$out"
TOML
  "$build/bin/loupe" run --stats "$tmp/p.toml" -- "$python" "$src/tests/python/workload.py" cpu 2 \
    >/dev/null 2>&1
  python3 - "$out" <<'PY'
import json, re, sys
run_ns = samples = fps = 0.0
codes, kib = 0, 0.0
for line in open(sys.argv[1]):
    r = json.loads(line)
    if r["kind"] == "metric" and r["name"] == "probe_run_time" and r["labels"].get("program") == "cs_sample":
        run_ns += r["metric"]["value"]
    elif r["kind"] == "metric" and r["name"] == "unwind_frames_per_stack" and r["is_final"]:
        fps = r["metric"]["value"]
    elif r["kind"] == "stack" and r["name"] == "cpu":
        samples += sum(v["value"] for v in r["stack"]["values"] if v["name"] == "samples")
    elif r["kind"] == "health" and r["name"] == "python_processes" and r["health"]["message"]:
        m = re.search(r"(\d+) code object\(s\) named \(([\d.]+) KiB\)", r["health"]["message"])
        if m: codes, kib = int(m.group(1)), float(m.group(2))
print("%.0f %.1f %d %.1f" % (run_ns / max(samples, 1), fps, codes, kib))
PY
}

on=() off=()
for ((i = 0; i < rounds; i++)); do
  if ((i % 2)); then off+=("$(run off)"); on+=("$(run on)"); else on+=("$(run on)"); off+=("$(run off)"); fi
done
median() { sort -n | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }
col() { printf '%s\n' "${@:2}" | awk -v c="$1" '{print $c}' | median; }
on_ns=$(col 1 "${on[@]}") off_ns=$(col 1 "${off[@]}")
echo "kernel $(uname -r), $python, $rounds rounds"
echo "  python_frames on : $on_ns ns per sample, $(col 2 "${on[@]}") frames per stack," \
  "$(col 3 "${on[@]}") code objects named ($(col 4 "${on[@]}") KiB)"
echo "  python_frames off: $off_ns ns per sample, $(col 2 "${off[@]}") frames per stack"
echo "  Python frames add $((on_ns - off_ns)) ns per sample" \
  "($(awk -v a="$on_ns" -v b="$off_ns" 'BEGIN {printf "%.2f", a / b}') x)"
