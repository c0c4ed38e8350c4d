#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
#
# fileio beside libbpf-tools' filetop and ext4slower on the same run, and its cost per
# cached read beside filetop's.
#
#   bench/fileio/compare.sh BUILD_DIR      (root; kernels with kprobes for the peers:
#                                           ./scripts/vmtest.sh 6.1 bench/fileio/compare.sh build)
#
# 1. Same run: filetop (5 s summary) and ext4slower -m 0 (every ext4 operation) run
#    system-wide while loupe's files profile runs fileio_workload on a directory under
#    $TMPDIR; per file, each tool's reads, writes and bytes are printed beside the
#    workload's known figures.
# 2. Cost: dd of a cached 64 MiB file with bs=4k to /dev/null (16,384 reads, 16,384 writes
#    to /dev/null), alone, under fileio and under filetop; median of 5, ns per read+write.
# A peer absent from PATH, or refused by the kernel, is reported as such.
set -uo pipefail
. "$(dirname "$0")/../common/timing.sh"
compare_setup "${1:-}" fileio_workload

cat >"$tmp/p.toml" <<TOML
[session]
output_dir = "$tmp/out"
[[plugins]]
name = "fileio"
slow_us = 0
[[sinks]]
name = "jsonl"
TOML
mkdir -p "$tmp/data"
head -c $((50 * 8192)) /dev/zero >"$tmp/data/b.dat"
echo e >"$tmp/data/e.dat"
sync

# ---- 1. the same run -------------------------------------------------------------------
have filetop && { filetop -C -r 100 -s all 6 1 >"$tmp/filetop.txt" 2>&1 & }
have ext4slower && { ext4slower -m 0 >"$tmp/ext4slower.txt" 2>&1 & }
sleep 2
"$loupe" run "$tmp/p.toml" -- "$work" "$tmp/data" >"$tmp/run.out" 2>&1 || cat "$tmp/run.out"
sleep 1
pkill -INT -x ext4slower 2>/dev/null
wait

python3 - "$tmp" <<'PY'
import json, sys, collections, re
tmp = sys.argv[1]
# c.tmp was renamed d.tmp after its write: one file to loupe (device:inode); the peers
# name files by their dentry at the event.
want = {"a.dat": (0, 100, 0, 409600, 10), "b.dat": (50, 4, 409600, 0, 0), "c.tmp": (0, 0, 0, 0, 0),
        "d.tmp": (1, 1, 1000, 1000, 0)}
loupe = collections.defaultdict(lambda: [0, 0, 0, 0, 0])  # reads, writes, rbytes, wbytes, fsyncs
for line in open(f"{tmp}/out/records.jsonl"):
    r = json.loads(line)
    if r["kind"] != "metric" or not r["is_final"] or r["name"] not in ("file_ops", "file_bytes"): continue
    name = r["labels"]["path"].rsplit("/", 1)[-1]
    op, v = r["labels"]["op"], r["metric"]["value"]
    if name not in want: continue
    if r["name"] == "file_ops":
        if op == "read": loupe[name][0] += v
        if op == "write": loupe[name][1] += v
        if op == "fsync": loupe[name][4] += v
    else:
        if op == "read": loupe[name][2] += v
        if op == "write": loupe[name][3] += v
# filetop: TID COMM READS WRITES R_Kb W_Kb T FILE
ft = collections.defaultdict(lambda: [0, 0, 0, 0])
ft_state = ""
try:
    for l in open(f"{tmp}/filetop.txt"):
        f = l.split()
        if len(f) >= 8 and f[2].isdigit() and f[-1] in want:
            ft[f[-1]][0] += int(f[2]); ft[f[-1]][1] += int(f[3])
            ft[f[-1]][2] += int(f[4]) * 1024; ft[f[-1]][3] += int(f[5]) * 1024
    if not ft: ft_state = " (no rows: " + open(f"{tmp}/filetop.txt").read().strip()[:120] + ")"
except FileNotFoundError:
    ft_state = " (filetop absent)"
# ext4slower: TIME COMM PID T BYTES OFF_KB LAT(ms) FILENAME
es = collections.defaultdict(collections.Counter)
es_state = ""
try:
    for l in open(f"{tmp}/ext4slower.txt"):
        f = l.split()
        if len(f) >= 8 and f[2].isdigit() and f[-1] in want:
            es[f[-1]][f[3]] += 1
    if not es: es_state = " (no rows: " + open(f"{tmp}/ext4slower.txt").read().strip()[:120] + ")"
except FileNotFoundError:
    es_state = " (ext4slower absent)"
print(f"{'file':6} {'':9} {'reads':>6} {'writes':>6} {'read B':>8} {'written B':>9} {'fsyncs':>6}")
for name, w in want.items():
    print(f"{name:6} {'workload':9} {w[0]:6} {w[1]:6} {w[2]:8} {w[3]:9} {w[4]:6}")
    l = loupe[name]
    print(f"{'':6} {'loupe':9} {l[0]:6.0f} {l[1]:6.0f} {l[2]:8.0f} {l[3]:9.0f} {l[4]:6.0f}")
    f = ft[name]
    print(f"{'':6} {'filetop':9} {f[0]:6} {f[1]:6} {f[2]:8} {f[3]:9} {'-':>6}{ft_state}")
    e = es[name]
    print(f"{'':6} {'ext4slow':9} {e['R']:6} {e['W']:6} {'-':>8} {'-':>9} {e['S'] + e['F']:6}{es_state}")
PY

# ---- 2. cost per cached read ------------------------------------------------------------
head -c $((64 << 20)) /dev/zero >"$tmp/cached.dat"
cat "$tmp/cached.dat" >/dev/null
dd_ns() {  # ns per 4 KiB read+write pair of one dd run
  local t0 t1
  t0=$(date +%s%N)
  dd if="$tmp/cached.dat" of=/dev/null bs=4k status=none
  t1=$(date +%s%N)
  echo $(((t1 - t0) / 16384))
}
base=$(median_of_5 dd_ns)
reads="dd if=$tmp/cached.dat of=/dev/null bs=4k status=none"
lo=$(measure_under_loupe "$loupe" "$tmp/p.toml" 16384 "$reads")
sed -i 's/^slow_us = 0$/slow_us = 0\nhooks = "vfs"/' "$tmp/p.toml"
vfs=$(measure_under_loupe "$loupe" "$tmp/p.toml" 16384 "$reads")
echo "cost per 4 KiB read + write to /dev/null (dd, cached, median of 5), ns:"
echo "  alone $base; loupe fileio $lo (+$((lo - base))); with hooks = \"vfs\" ${vfs:-refused} (+$((${vfs:-0} - base)))"
if have filetop; then
  ft=$(measure_beside dd_ns filetop -C 1000)
  echo "  filetop $ft (+$((ft - base)))"
fi
