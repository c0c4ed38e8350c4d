#!/usr/bin/env bash
# End-to-end tests of the loupe CLI. Usage: cli_test.sh <case>. Exit 77 = skipped.
set -uo pipefail
LOUPE=${LOUPE_BIN:?}
SRC=${LOUPE_SOURCE_DIR:?}
TMP=$(mktemp -d /tmp/loupe-e2e.XXXXXX)
trap 'rm -rf "$TMP"' EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }
need_root() { [[ $(id -u) -eq 0 ]] || { echo "SKIP: needs root (CAP_BPF, CAP_PERFMON)"; exit 77; }; }
expect_rc() { # expected actual what
  [[ $1 -eq $2 ]] || fail "$3: exit code $2, expected $1"
}
# IDs of loaded programs of the plugin these cases run (none may survive a run). Only
# syscount's: other suites may be loading their own programs at the same time.
our_progs() {
  bpftool prog show 2>/dev/null | awk '/^[0-9]+:/ {print $1, $4}' | grep -E ' syscount_' | sort || true
}

case_check() {
  need_root
  "$LOUPE" check --json >"$TMP/check.json" || fail "loupe check failed"
  python3 - "$TMP/check.json" <<'PY' || exit 1
import json, sys
f = {x["name"]: x for x in json.load(open(sys.argv[1]))["features"]}
for name in ["tracepoint", "raw_tp", "uprobe", "uretprobe", "perf_event", "ringbuf", "btf"]:
    assert f[name]["available"], f"{name} should work here: {f[name]['reason']}"
# kprobes and fentry differ between kernels: each pair agrees, and a refusal says why.
for a, b in [("kprobe", "kretprobe"), ("fentry", "fexit")]:
    assert f[a]["available"] == f[b]["available"], f"{a}/{b} disagree: {f[a]} {f[b]}"
for name in ["kprobe", "kretprobe", "fentry", "fexit"]:
    assert len(f[name]["reason"]) > 20, f"{name} must say why: {f[name]['reason']!r}"
if not f["kprobe"]["available"] and "disabled" not in f["kprobe"]["reason"]:
    assert "CONFIG_KPROBES" in f["kprobe"]["reason"], f["kprobe"]["reason"]
open(sys.argv[1] + ".kprobe", "w").write("yes" if f["kprobe"]["available"] else "NO")
print("check ok")
PY
  # The human table says what --json says.
  "$LOUPE" check | grep -q "kprobe .*$(cat "$TMP/check.json.kprobe")" ||
    fail "human table must say kprobe $(cat "$TMP/check.json.kprobe"), as --json does"
  "$LOUPE" --disable-feature tracepoint check --json | python3 -c '
import json,sys; f={x["name"]:x for x in json.load(sys.stdin)["features"]}
assert f["tracepoint"]["forced_off"] and not f["tracepoint"]["available"]' || fail "--disable-feature"
}

case_validate() {
  printf '[session]\nduration = 5\n[[plugins]\nname = "syscount"\n' >"$TMP/broken.toml"
  "$LOUPE" validate "$TMP/broken.toml" 2>"$TMP/err"; rc=$?
  expect_rc 3 $rc "syntax error"
  grep -qE "broken.toml:3:[0-9]+: error" "$TMP/err" || fail "no file:line:col in: $(cat "$TMP/err")"
  printf '[[plugins]]\nname = "syscount"\ntop = "many"\nbogus = 1\n[[sinks]]\nname = "jsonl"\n' >"$TMP/schema.toml"
  "$LOUPE" validate "$TMP/schema.toml" 2>"$TMP/err"; rc=$?
  expect_rc 3 $rc "schema error"
  grep -q "schema.toml:3:7: error: plugin 'syscount'.top: expected integer, found string" "$TMP/err" || fail "type: $(cat "$TMP/err")"
  grep -q "schema.toml:4:1: error: unknown key 'bogus'" "$TMP/err" || fail "unknown key: $(cat "$TMP/err")"
  "$LOUPE" validate "$SRC/profiles/default.toml" || fail "default profile must validate"
  for p in "$SRC"/profiles/*.toml; do "$LOUPE" validate "$p" >/dev/null || fail "$p must validate"; done
}

case_plugin_errors() {
  printf '[[plugins]]\nname = "bad_wrong_major"\nlibrary = "%s/loupe-bad-wrong_major.so"\n[[sinks]]\nname = "jsonl"\n' \
    "$BAD_PLUGIN_DIR" >"$TMP/abi.toml"
  "$LOUPE" validate "$TMP/abi.toml" 2>"$TMP/err"; rc=$?
  expect_rc 4 $rc "wrong ABI"
  grep -q "plugin ABI 2.3 is incompatible with host ABI 1.3" "$TMP/err" || fail "versions not named: $(cat "$TMP/err")"
  grep -q "loupe-bad-wrong_major.so" "$TMP/err" || fail "file not named"
  printf '[[plugins]]\nname = "nosuch"\n[[sinks]]\nname = "jsonl"\n' >"$TMP/missing.toml"
  "$LOUPE" validate "$TMP/missing.toml" 2>"$TMP/err"; rc=$?
  expect_rc 4 $rc "missing plugin"
  grep -q "missing.toml:1:1: plugin 'nosuch' not found" "$TMP/err" || fail "missing: $(cat "$TMP/err")"
  LOUPE_PLUGIN_PATH="$BAD_PLUGIN_DIR" "$LOUPE" list >"$TMP/list" || fail "list"
  grep -q "rejected: .*loupe-bad-newer_minor.so: plugin ABI 1.3 is newer" "$TMP/list" || fail "list rejections: $(cat "$TMP/list")"
  "$LOUPE" describe jsonl | grep -q "config keys" || fail "describe"
  "$LOUPE" describe nosuch 2>/dev/null; expect_rc 4 $? "describe missing"
  "$LOUPE" run 2>/dev/null; expect_rc 2 $? "usage error"
  if [[ $(id -u) -eq 0 ]]; then
    # A setup error stands alone: no empty report (records 0, no health) before it.
    printf '[[plugins]]\nname = "offcpu"\nmechanism = "kprobe"\n[[sinks]]\nname = "console"\n' \
      >"$TMP/setup.toml"
    "$LOUPE" run "$TMP/setup.toml" -- true >"$TMP/out" 2>&1 && fail "a setup error ran"
    grep -q 'mechanism = "kprobe": expected auto' "$TMP/out" || fail "error not said: $(cat "$TMP/out")"
    ! grep -qE "records 0|VERDICT|loupe report" "$TMP/out" || fail "an empty report came with the error: $(cat "$TMP/out")"
  fi
}

case_run_syscount() {
  need_root
  before=$(our_progs)
  cat >"$TMP/p.toml" <<TOML
[session]
output_dir = "$TMP/out"
[[plugins]]
name = "syscount"
top = 0
[[sinks]]
name = "jsonl"
[[sinks]]
name = "console"
TOML
  "$LOUPE" run "$TMP/p.toml" -- sh -c 'for i in 1 2 3 4 5 6 7; do /bin/true; done' >"$TMP/stdout" 2>"$TMP/stderr"
  expect_rc 0 $? "run: $(cat "$TMP/stderr")"
  grep -q "HEALTH SUMMARY" "$TMP/stdout" || fail "console report missing"
  python3 - "$TMP/out/records.jsonl" <<'PY' || exit 1
import json, sys
recs = [json.loads(l) for l in open(sys.argv[1])]
calls = {r["labels"].get("syscall"): r["metric"]["value"] for r in recs if r["kind"] == "metric" and r["name"] == "syscalls"}
# sh forks 7 children and waits for each one: wait4 is counted in sh (the target) only.
assert calls.get("wait4", 0) >= 7, calls
assert any(r["kind"] == "health" for r in recs), "no health records"
print("syscount ok", calls.get("wait4"))
PY
  [[ "$(our_progs)" == "$before" ]] || fail "BPF programs left behind: $(our_progs)"
}

case_interrupt_and_cleanup() {
  need_root
  before=$(our_progs)
  cat >"$TMP/p.toml" <<TOML
[session]
duration = 60
output_dir = "$TMP/out"
[[plugins]]
name = "syscount"
[[sinks]]
name = "jsonl"
TOML
  "$LOUPE" run "$TMP/p.toml" >/dev/null 2>&1 &
  pid=$!
  sleep 1.5
  [[ "$(our_progs)" != "$before" ]] || fail "no program loaded while running"
  kill -INT $pid
  start=$(date +%s%N)
  wait $pid; rc=$?
  took=$(( ($(date +%s%N) - start) / 1000000 ))
  expect_rc 130 $rc "SIGINT"
  (( took < 5000 )) || fail "SIGINT took ${took} ms"
  grep -q '"kind":"metric"' "$TMP/out/records.jsonl" || fail "interrupted run must still write its report"
  [[ "$(our_progs)" == "$before" ]] || fail "programs left after SIGINT: $(our_progs)"
  # SIGKILL: nothing is pinned, so the kernel frees everything with our fds.
  "$LOUPE" run "$TMP/p.toml" >/dev/null 2>&1 &
  pid=$!
  sleep 1.5
  kill -KILL $pid; wait $pid 2>/dev/null
  for _ in $(seq 50); do [[ "$(our_progs)" == "$before" ]] && break; sleep 0.1; done
  [[ "$(our_progs)" == "$before" ]] || fail "programs left after SIGKILL: $(our_progs)"
  ls /sys/fs/bpf 2>/dev/null | grep -q loupe && fail "something pinned under /sys/fs/bpf"
  echo "interrupt ok (${took} ms)"
}

case_record_replay() {
  need_root
  cat >"$TMP/p.toml" <<TOML
[session]
output_dir = "$TMP/live"
[[plugins]]
name = "latency"
outlier_ns = 1000000
  [[plugins.targets]]
  name = "nanosleep"
  syscall = "clock_nanosleep"
[[sinks]]
name = "jsonl"
TOML
  "$LOUPE" run "$TMP/p.toml" --record "$TMP/cap" -- "${LOUPE_BUILD_DIR}/bin/loupe-demo" 0.3 >/dev/null 2>"$TMP/err"
  expect_rc 0 $? "record: $(cat "$TMP/err")"
  "$LOUPE" replay "$TMP/cap" "$TMP/p.toml" -o "$TMP/replayed" 2>"$TMP/err"
  expect_rc 0 $? "replay: $(cat "$TMP/err")"
  # Every outlier event recorded live comes back, field for field, without a kernel.
  python3 - "$TMP/live/records.jsonl" "$TMP/replayed/records.jsonl" <<'PY' || exit 1
import json, sys
def events(p):
    return [json.dumps(r["event"]["fields"], sort_keys=True) for r in map(json.loads, open(p)) if r["kind"] == "event"]
live, replayed = events(sys.argv[1]), events(sys.argv[2])
assert len(live) >= 20, f"too few outliers recorded: {len(live)}"
assert live == replayed, f"replay differs: {len(live)} live vs {len(replayed)} replayed"
print("replay ok", len(live))
PY
}

case_diff() {
  need_root
  # Three runs of a command that sleeps 15 times: two alike (10 ms), one slower (40 ms).
  # loupe diff must flag the slower one's percentiles and nothing between the alike two.
  sleeper() { echo "for i in \$(seq 15); do sleep $1; done"; }
  for run in base same slower; do
    local t=0.01
    [[ $run == slower ]] && t=0.04
    cat >"$TMP/$run.toml" <<TOML
[session]
output_dir = "$TMP/$run"
[[plugins]]
name = "latency"
  [[plugins.targets]]
  syscall = "clock_nanosleep"
[[sinks]]
name = "jsonl"
TOML
    "$LOUPE" run "$TMP/$run.toml" -- sh -c "$(sleeper $t)" >"$TMP/$run.log" 2>&1 ||
      fail "run $run: $(tail -3 "$TMP/$run.log")"
  done
  "$LOUPE" diff "$TMP/base" "$TMP/same" >"$TMP/same.diff" 2>&1
  expect_rc 0 $? "diff of two alike runs ($(cat "$TMP/same.diff"))"
  grep -q "no shift" "$TMP/same.diff" || fail "alike runs: $(cat "$TMP/same.diff")"
  "$LOUPE" diff "$TMP/base" "$TMP/slower" --folded-diff "$TMP/diff.folded" >"$TMP/slower.diff" 2>&1
  expect_rc 1 $? "diff of a slower run ($(cat "$TMP/slower.diff"))"
  # 15 values: p50 is judged (7 above it), p99 is not (it is the maximum).
  grep -E "latency/latency.*clock_nanosleep.*p50 .* UP" "$TMP/slower.diff" >/dev/null ||
    fail "no p50 shift flagged: $(cat "$TMP/slower.diff")"
  cat "$TMP/slower.diff"
  "$LOUPE" diff "$TMP/base" "$TMP/nowhere" >/dev/null 2>&1
  expect_rc 2 $? "diff of a missing run"
}

case_demo() {
  need_root
  cd "$TMP" || exit 1
  "$LOUPE" run "$SRC/profiles/default.toml" -- "${LOUPE_BUILD_DIR}/bin/loupe-demo" 1 >"$TMP/stdout" 2>"$TMP/stderr"
  expect_rc 0 $? "demo: $(cat "$TMP/stderr")"
  grep -q "loupe report" "$TMP/stdout" || fail "no report"
  grep -q "VERDICT" "$TMP/stdout" || fail "no health verdict"
  [[ -s "$TMP/loupe-out/records.jsonl" ]] || fail "no jsonl"
}

"case_$1"
