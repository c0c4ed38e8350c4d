#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
#
# What a runtime's frames cost cpusample per sample, and what their names hold in user
# space: Python's (python_frames) or Node's V8 ([runtimes.v8] frames).
#
#   bench/cpusample/runtime_cost.sh BUILD_DIR [ROUNDS=5] [RUNTIME=python] [PROGRAM]
#
# python: PROGRAM (default /usr/bin/python3.11) runs tests/python/workload.py's CPU mode
# (heavy() and light(), 4-5 Python frames a stack). node: PROGRAM (default node) runs
# plugins/cpusample/tests/two_hot.js (two functions with loops, under the module's own
# frames). Each round runs it for 2 s under cpusample at 999 Hz with --stats twice, the
# runtime's frames on and off, in alternating order so drift hits both. Per run: the
# sampling program's BPF run time (the kernel's own stats) over the samples taken in the
# target. Printed: the median per sample of each, their difference (the runtime step's
# cost), frames per stack, and the functions named with what their names hold.
# Runs where it is started: on the host, or inside a guest (scripts/vmtest.sh K bench/...);
# an emulated guest's absolute µs are the emulator's, its on/off ratio is still the walk's.
set -euo pipefail
build=$(cd "${1:?usage: runtime_cost.sh BUILD_DIR [ROUNDS] [RUNTIME] [PROGRAM]}" && pwd)
rounds=${2:-5}
runtime=${3:-python}
src=$(cd "$(dirname "$0")/../.." && pwd)
case $runtime in
  python)
    program=${4:-/usr/bin/python3.11}
    cmd=("$program" "$src/tests/python/workload.py" cpu 2) ;;
  node)
    program=${4:-$(command -v node || true)}
    [ -n "$program" ] || { echo "runtime_cost: no node on PATH" >&2; exit 2; }
    cmd=("$program" "$src/plugins/cpusample/tests/two_hot.js" 2) ;;
  *) echo "runtime_cost: RUNTIME is python or node" >&2; exit 1 ;;
esac
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

run() {  # run on|off: prints "ns_per_sample frames_per_stack functions kib"
  local on=$1 out=$tmp/$1.jsonl
  {
    [[ $runtime == node ]] && printf '[runtimes.v8]\nframes = %s\n\n' \
      "$([[ $on == on ]] && echo true || echo false)"
    echo '[[plugins]]'
    echo 'name = "cpusample"'
    echo 'frequency = 999'
    [[ $runtime == python ]] && echo "python_frames = $([[ $on == on ]] && echo true || echo false)"
    printf '[[sinks]]\nname = "jsonl"\npath = "%s"\n' "$out"
  } >"$tmp/p.toml"
  "$build/bin/loupe" run --stats "$tmp/p.toml" -- "${cmd[@]}" >/dev/null 2>&1
  python3 - "$out" <<'PY'
import json, re, sys
run_ns = samples = fps = 0.0
named, kib = 0, 0.0
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
        if m: named, kib = int(m.group(1)), float(m.group(2))
    elif r["kind"] == "health" and r["name"] == "v8_processes" and r["health"]["message"]:
        m = re.search(r"(\d+) function\(s\) read", r["health"]["message"])
        if m: named = int(m.group(1))
print("%.0f %.1f %d %.1f" % (run_ns / max(samples, 1), fps, named, kib))
PY
}

on=() off=()
for ((i = 0; i < rounds; i++)); do
  if ((i % 2)); then off+=("$(run off)"); on+=("$(run on)"); else on+=("$(run on)"); off+=("$(run off)"); fi
done
median() { sort -n | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }
col() { printf '%s\n' "${@:2}" | awk -v c="$1" '{print $c}' | median; }
on_ns=$(col 1 "${on[@]}") off_ns=$(col 1 "${off[@]}")
echo "kernel $(uname -r), $runtime ($program), $rounds rounds"
echo "  $runtime frames on : $on_ns ns per sample, $(col 2 "${on[@]}") frames per stack," \
  "$(col 3 "${on[@]}") functions named ($(col 4 "${on[@]}") KiB)"
echo "  $runtime frames off: $off_ns ns per sample, $(col 2 "${off[@]}") frames per stack"
echo "  $runtime frames add $((on_ns - off_ns)) ns per sample" \
  "($(awk -v a="$on_ns" -v b="$off_ns" 'BEGIN {printf "%.2f", a / b}') x)"
