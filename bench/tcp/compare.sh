#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
#
# tcp beside libbpf-tools' tcplife and tcpconnlat on the same run, and its cost per
# connection beside theirs.
#
#   bench/tcp/compare.sh BUILD_DIR      (root; kernels with kprobes for the peers:
#                                        ./scripts/vmtest.sh 6.1 bench/tcp/compare.sh build)
#
# 1. Same run: tcplife and tcpconnlat run system-wide while loupe's net profile runs
#    tcp_workload 10 (10 connections of known size, one refused, one reset, two over ::1);
#    the connections to the workload's port, their bytes and connect latencies are printed
#    from each tool.
# 2. Cost: tcp_workload 300 timed alone, under loupe's tcp, under tcplife and under
#    tcpconnlat; median of 5, µs per connection (both ends in the one process).
# A peer absent from PATH, or refused by the kernel, is reported as such.
set -uo pipefail
. "$(dirname "$0")/../common/timing.sh"
compare_setup "${1:-}" tcp_workload
ip link set lo up 2>/dev/null

cat >"$tmp/p.toml" <<TOML
[session]
output_dir = "$tmp/out"
[[plugins]]
name = "tcp"
[[sinks]]
name = "jsonl"
TOML

# ---- 1. the same run -------------------------------------------------------------------
have tcplife && { tcplife -w >"$tmp/tcplife.txt" 2>&1 & }
have tcpconnlat && { tcpconnlat -L >"$tmp/tcpconnlat.txt" 2>&1 & }
sleep 2
"$loupe" run "$tmp/p.toml" -- "$work" 10 >"$tmp/run.out" 2>&1 || cat "$tmp/run.out"
sleep 1
pkill -INT -x tcplife 2>/dev/null
pkill -INT -x tcpconnlat 2>/dev/null
wait

python3 - "$tmp" <<'PY'
import json, re, sys
tmp = sys.argv[1]
port = re.search(r"port=(\d+)", open(f"{tmp}/run.out").read()).group(1)
lo_out, lo_in = [], []
for line in open(f"{tmp}/out/records.jsonl"):
    r = json.loads(line)
    if r["kind"] != "event" or r["name"] != "tcp_connection": continue
    f = r["event"]["fields"]
    if f["direction"] == "out" and str(f["remote_port"]) == port:
        lo_out.append((f["tx_bytes"], f["rx_bytes"], f["connect_ns"] / 1e6))
    if f["direction"] == "in" and str(f["local_port"]) == port:
        lo_in.append((f["tx_bytes"], f["rx_bytes"], f.get("accept_wait_ns", 0) / 1e6))
# tcplife -w: PID COMM LADDR LPORT RADDR RPORT TX_KB RX_KB MS
tl_out, tl_in, tl_state = [], [], ""
try:
    for l in open(f"{tmp}/tcplife.txt"):
        f = l.split()
        if len(f) < 9 or not f[0].isdigit(): continue
        if f[5] == port: tl_out.append((float(f[6]), float(f[7])))
        if f[3] == port: tl_in.append((float(f[6]), float(f[7])))
    if not tl_out and not tl_in: tl_state = open(f"{tmp}/tcplife.txt").read().strip()[:160]
except FileNotFoundError:
    tl_state = "absent"
# tcpconnlat -L: PID COMM IP SADDR LPORT DADDR DPORT LAT(ms)
cl, cl_state = [], ""
try:
    for l in open(f"{tmp}/tcpconnlat.txt"):
        f = l.split()
        if len(f) >= 8 and f[0].isdigit() and f[6] == port: cl.append(float(f[7]))
    if not cl: cl_state = open(f"{tmp}/tcpconnlat.txt").read().strip()[:160]
except FileNotFoundError:
    cl_state = "absent"
kb = lambda rows: sorted((round(a / 1024, 2), round(b / 1024, 2)) for a, b, *_ in rows)
print(f"connections to port {port} (workload: 11 out incl. 1 reset, 11 in)")
print(f"  loupe:   {len(lo_out)} out, {len(lo_in)} in; out bytes (tx, rx): {sorted((a, b) for a, b, _ in lo_out)}")
print(f"  tcplife: {len(tl_out)} out, {len(tl_in)} in; out KB (tx, rx): {sorted(tl_out)}" + (f"  [{tl_state}]" if tl_state else ""))
print(f"  loupe out in KB (tcplife's unit): {kb(lo_out)}")
lc = sorted(c for _, _, c in lo_out)
print(f"  connect latency ms, loupe:      {[round(x, 3) for x in lc]}")
print(f"  connect latency ms, tcpconnlat: {sorted(round(x, 3) for x in cl)}" + (f"  [{cl_state}]" if cl_state else ""))
print(f"  accept wait ms, loupe (no peer measures it): {sorted(round(w, 3) for _, _, w in lo_in)}")
PY

# ---- 2. cost per connection -------------------------------------------------------------
N=300
conn_us() {  # µs per connection of one run of the workload
  local t0 t1
  t0=$(date +%s%N)
  "$work" $N >/dev/null
  t1=$(date +%s%N)
  echo $(((t1 - t0) / N / 1000))
}
base=$(median_of_5 conn_us)
lo=$(measure_under_loupe "$loupe" "$tmp/p.toml" $((N * 1000)) "$work $N")
echo "cost per connection (tcp_workload $N, median of 5), µs:"
echo "  alone $base; loupe tcp $lo (+$((lo - base)))"
for peer in tcplife tcpconnlat; do
  if have $peer; then
    t=$(measure_beside conn_us $peer)
    echo "  $peer $t (+$((t - base)))"
  fi
done
