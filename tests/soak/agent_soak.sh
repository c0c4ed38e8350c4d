#!/usr/bin/env bash
# The agent over time (issue 31): `loupe run agent` (profiles/agent.toml, system-wide, a
# window every ROTATE seconds) for DURATION seconds beside process churn (a loop starting
# ~50 short processes a second) and a long-running server (python's http.server under a
# client loop), with a Prometheus server scraping /metrics. Samples loupe's RSS and fds
# every second. Asserts:
#   - the RSS floor of the last fifth is within RSS_GROWTH_MB (default 24) of the warm-up's
#     (the first fifth): memory follows the live processes, not every process seen;
#   - a window was published every ROTATE seconds (one more at the stop), none half written,
#     and `go tool pprof -top` reads every window's cpu.pb.gz;
#   - Prometheus scraped the endpoint: its `up` for loupe is 1 and it holds loupe's series.
# Prints the RSS curve (a line a minute) for docs/agent.md.
# Usage: agent_soak.sh DURATION [ROTATE] [OUTDIR]. Needs root; exit 77 = skipped.
set -uo pipefail
DURATION=${1:?usage: agent_soak.sh DURATION [ROTATE] [OUTDIR]}
ROTATE=${2:-60}
LOUPE=${LOUPE_BIN:?}
SRC=${LOUPE_SOURCE_DIR:-$(cd "$(dirname "$0")/../.." && pwd)}
RSS_GROWTH_MB=${RSS_GROWTH_MB:-24}
[[ $(id -u) -eq 0 ]] || { echo "SKIP: needs root"; exit 77; }
OUT=${3:-$(mktemp -d /tmp/loupe-agent-soak.XXXXXX)}
mkdir -p "$OUT"
fail() { echo "FAIL: $*" >&2; exit 1; }
mountpoint -q /sys/kernel/tracing || mount -t tracefs nodev /sys/kernel/tracing 2>/dev/null
PORT=${PORT:-9750}
PY=/usr/bin/python3.11
[[ -x $PY ]] || PY=python3

# The agent profile as installed, with the window length of this run.
sed -e "s/^rotate = .*/rotate = $ROTATE/" -e "s/^retain = .*/retain = 1000/" \
  -e "s|^listen = .*|listen = \"127.0.0.1:$PORT\"|" "$SRC/profiles/agent.toml" >"$OUT/agent.toml"

end=$(($(date +%s) + DURATION))
# Churn: ~50 processes a second (each a fork and an exec of a short command).
( while (($(date +%s) < end)); do for i in 1 2 3 4 5; do /bin/true; done; sleep 0.1; done ) &
churn=$!
# A long-running server and its client.
$PY -m http.server 18081 --bind 127.0.0.1 --directory "$OUT" >/dev/null 2>&1 &
server=$!
( while (($(date +%s) < end)); do curl -s -o /dev/null http://127.0.0.1:18081/; sleep 0.1; done ) &
client=$!

# Prometheus scraping the agent every 5 s.
prom=""
if command -v prometheus >/dev/null; then
  cat >"$OUT/prometheus.yml" <<YML
global: {scrape_interval: 5s}
scrape_configs:
  - job_name: loupe
    static_configs: [{targets: ["127.0.0.1:$PORT"]}]
YML
  prometheus --config.file="$OUT/prometheus.yml" --storage.tsdb.path="$OUT/tsdb" \
    --web.listen-address=127.0.0.1:19090 >"$OUT/prometheus.log" 2>&1 &
  prom=$!
fi

"$LOUPE" -v run "$OUT/agent.toml" --output "$OUT/out" --duration "$DURATION" --reloadable \
  >"$OUT/loupe.log" 2>&1 &
pid=$!
: >"$OUT/samples.csv"
start=$(date +%s)
while kill -0 $pid 2>/dev/null; do
  rss=$(awk '/^VmRSS:/ {print $2}' /proc/$pid/status 2>/dev/null)
  fds=$(ls /proc/$pid/fd 2>/dev/null | wc -l)
  [[ -n $rss ]] && grep -q "session running" "$OUT/loupe.log" &&
    echo "$(($(date +%s) - start)) $rss $fds" >>"$OUT/samples.csv"
  sleep 1
done
wait $pid; rc=$?
up=""
if [[ -n $prom ]]; then
  up=$(curl -s 'http://127.0.0.1:19090/api/v1/query?query=up%7Bjob%3D%22loupe%22%7D%5B10m%5D')
  series=$(curl -s 'http://127.0.0.1:19090/api/v1/label/__name__/values')
  kill $prom
fi
kill $churn $server $client 2>/dev/null
wait 2>/dev/null
[[ $rc -eq 0 || $rc -eq 130 ]] || fail "loupe exited $rc: $(tail -5 "$OUT/loupe.log")"

windows=$(ls -d "$OUT"/out/windows/2* 2>/dev/null | wc -l)
partial=$(ls -d "$OUT"/out/windows/.partial* 2>/dev/null | wc -l)
unread=0
for w in "$OUT"/out/windows/2*; do
  [[ -s $w/cpu.pb.gz ]] || { echo "no cpu.pb.gz in $w"; unread=$((unread + 1)); continue; }
  if command -v go >/dev/null && ! go tool pprof -top "$w/cpu.pb.gz" >"$w/top.txt" 2>&1; then
    echo "go tool pprof cannot read $w/cpu.pb.gz: $(tail -2 "$w/top.txt")"
    unread=$((unread + 1))
  fi
done
echo "windows: $windows published, $partial half written, $unread unreadable by go tool pprof"
(( windows >= DURATION / ROTATE )) || fail "only $windows windows in $DURATION s at rotate = $ROTATE"
(( partial == 0 && unread == 0 )) || fail "windows half written or unreadable"
if [[ -n $prom ]]; then
  ups=$(grep -o '"1"' <<<"$up" | wc -l)
  echo "prometheus: $ups scrapes with up == 1; loupe series: $(grep -o '"loupe_[a-z_]*"' <<<"$series" | sort -u | wc -l)"
  ((ups > 0)) || fail "prometheus never scraped loupe: $up"
fi

python3 - "$OUT" "$RSS_GROWTH_MB" <<'PY' || exit 1
import sys
out, growth = sys.argv[1], float(sys.argv[2])
s = [tuple(map(int, l.split())) for l in open(f"{out}/samples.csv") if l.strip()]
if len(s) < 10: sys.exit(f"FAIL: only {len(s)} samples")
rss = [x[1] / 1024 for x in s]
w = max(1, len(s) // 5)
curve = " ".join(f"{t // 60}m:{r / 1024:.0f}" for t, r, _ in s if t % 60 == 0)
print(f"rss_mb: warmup_floor={min(rss[:w]):.1f} max={max(rss):.1f} end_floor={min(rss[-w:]):.1f}; "
      f"fds: first={s[0][2]} max={max(x[2] for x in s)} end={s[-1][2]}")
print(f"rss by minute (MiB): {curve}")
if min(rss[-w:]) - min(rss[:w]) > growth:
    sys.exit(f"FAIL: RSS floor grew {min(rss[-w:]) - min(rss[:w]):.1f} MiB (> {growth})")
PY
grep -h '"name": *"windows' "$OUT/out/records.jsonl" | tail -2 | cut -c1-400
echo "agent soak ok (${DURATION} s, output in $OUT)"
[[ -z ${3:-} ]] && rm -rf "$OUT"
exit 0
