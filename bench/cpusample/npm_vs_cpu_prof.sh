#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
#
# JavaScript functions as loupe names them (V8's own structures, no flag) against V8's own
# profiler (node --cpu-prof), on the same runs of a real Node.js program nobody here wrote:
# npm listing its own dependency tree (`npm ls --all`, module loading, JSON, semver), under
# the unchanged `cpu` profile.
#
#   bench/cpusample/npm_vs_cpu_prof.sh BUILD_DIR [RUNS=6]
#
# Printed: the samples with a JavaScript frame (loupe) and in JavaScript (V8: without
# "(program)", "(garbage collector)", "(idle)"); V8's hottest functions by self samples with
# V8's share and loupe's (the innermost JavaScript frame of each sample), then loupe's own
# hottest; and the v8_* health rows. V8 counts a native callback (`internalModuleStat`,
# `URL`, `lstat`) as a function of its own; loupe shows its native frames under the
# JavaScript function that called it. Exit 2 without node or npm.
set -euo pipefail
build=$(cd "${1:?usage: npm_vs_cpu_prof.sh BUILD_DIR [RUNS]}" && pwd)
runs=${2:-6}
[[ ${LOUPE_BENCH_SMOKE:-0} == 1 ]] && runs=1
node=$(command -v node || true)
cli=$(dirname "$(readlink -f "$(command -v npm || echo /nonexistent)")")/npm-cli.js
[[ -n $node && -f $cli ]] || { echo "npm_vs_cpu_prof: no node or npm" >&2; exit 2; }
npm_dir=$(cd "$(dirname "$cli")/.." && pwd)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
mountpoint -q /sys/kernel/tracing || mount -t tracefs nodev /sys/kernel/tracing 2>/dev/null || true

"$build/bin/loupe" run cpu -o "$tmp/out" -- bash -c "for i in \$(seq 1 $runs); do
    '$node' --cpu-prof --cpu-prof-dir='$tmp/prof' '$cli' ls --all --prefix '$npm_dir' >/dev/null 2>&1 || true  # 1: npm found problems in the tree
  done" >/dev/null 2>"$tmp/stderr" || { cat "$tmp/stderr" >&2; exit 1; }

python3 - "$tmp/out/records.jsonl" "$tmp/prof" <<'PY'
import collections, glob, json, sys
loupe, loupe_js, health = collections.Counter(), 0, []
for line in open(sys.argv[1]):
    r = json.loads(line)
    if r.get("kind") == "health" and r["name"].startswith("v8_"):
        health.append(r)
    if r.get("kind") != "stack":
        continue
    n = r["stack"]["values"][0]["value"]
    for f in r["stack"]["frames"]:
        if f.get("kind") == "js":
            loupe[f.get("symbol") or "(unnamed)"] += n
            loupe_js += n
            break
v8, v8_js = collections.Counter(), 0
for p in glob.glob(sys.argv[2] + "/*.cpuprofile"):
    d = json.load(open(p))
    names = {n["id"]: n["callFrame"]["functionName"] or "<anonymous>" for n in d["nodes"]}
    for s in d["samples"]:
        if names[s] in ("(program)", "(garbage collector)", "(idle)", "(root)"):
            continue
        v8[names[s]] += 1
        v8_js += 1
if not loupe_js or not v8_js:
    sys.exit(f"npm_vs_cpu_prof: no JavaScript samples (loupe {loupe_js}, V8 {v8_js})")
print(f"samples with a JavaScript frame: loupe {loupe_js}; V8's profiler, in JavaScript: {v8_js}")
print(f"  {'function (V8: hottest 12, self)':34} {'V8':>6} {'loupe':>6}")
for k, v in v8.most_common(12):
    print(f"  {k[:34]:34} {100 * v / v8_js:5.1f}% {100 * loupe[k] / loupe_js:5.1f}%")
print("  loupe's hottest: " + ", ".join(f"{k} {100 * v / loupe_js:.1f}%" for k, v in loupe.most_common(6)))
for r in health:
    h = r["health"]
    if h.get("value"):
        print(f"  {r['name']} {h['value']}: {(h.get('message') or '')[:160]}")
PY
