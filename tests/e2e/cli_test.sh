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
# Whether our programs are gone (as in $1, before loupe ran). A tp_btf program is freed by
# the kernel after its link's RCU grace period, a few ms after loupe closed it: left
# behind is one still there 5 s later (an emulated guest's grace periods are long).
progs_back_to() {
  for _ in $(seq 100); do [[ "$(our_progs)" == "$1" ]] && return 0; sleep 0.05; done
  [[ "$(our_progs)" == "$1" ]]
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
  # The default unwinder's kernel needs are in the table, and they decide: without
  # bpf_find_vma the profilers fall back to frame pointers and say so.
  "$LOUPE" check | grep -qE "^ *bpf_loop " || fail "loupe check does not list bpf_loop"
  "$LOUPE" check | grep -qE "^ *find_vma " || fail "loupe check does not list find_vma"
  if [[ $(id -u) -eq 0 ]]; then
    "$LOUPE" --disable-feature find_vma run cpu --duration 1 -- true >"$TMP/out" 2>&1 ||
      fail "cpu without find_vma did not run: $(cat "$TMP/out")"
    grep -q 'unwind = "tables" is not possible here (find_vma: disabled by --disable-feature)' \
      "$TMP/out" || fail "the frame-pointer fallback was not said: $(cat "$TMP/out")"
  fi
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
  grep -qE "plugin ABI 2\.[0-9]+ is incompatible with host ABI 1\.[0-9]+ \(major versions differ\)" "$TMP/err" || fail "versions not named: $(cat "$TMP/err")"
  grep -q "loupe-bad-wrong_major.so" "$TMP/err" || fail "file not named"
  printf '[[plugins]]\nname = "nosuch"\n[[sinks]]\nname = "jsonl"\n' >"$TMP/missing.toml"
  "$LOUPE" validate "$TMP/missing.toml" 2>"$TMP/err"; rc=$?
  expect_rc 4 $rc "missing plugin"
  grep -q "missing.toml:1:1: error: plugin 'nosuch' not found" "$TMP/err" || fail "missing: $(cat "$TMP/err")"
  LOUPE_PLUGIN_PATH="$BAD_PLUGIN_DIR" "$LOUPE" list >"$TMP/list" || fail "list"
  grep -qE "rejected: .*loupe-bad-newer_minor.so: plugin ABI 1\.[0-9]+ is newer" "$TMP/list" || fail "list rejections: $(cat "$TMP/list")"
  "$LOUPE" describe jsonl | grep -q "config keys" || fail "describe"
  "$LOUPE" describe nosuch 2>/dev/null; expect_rc 4 $? "describe missing"
  "$LOUPE" run 2>/dev/null; expect_rc 2 $? "usage error"
  if [[ $(id -u) -eq 0 ]]; then
    # A setup error stands alone: no empty report (records 0, no health) before it. The
    # hook the profile names is one the kernel is made to lack (a value the schema refuses
    # never reaches setup).
    printf '[[plugins]]\nname = "offcpu"\nmechanism = "tp_btf"\n[[sinks]]\nname = "console"\n' \
      >"$TMP/setup.toml"
    "$LOUPE" --disable-feature tp_btf run "$TMP/setup.toml" -- true >"$TMP/out" 2>&1 &&
      fail "a setup error ran"
    grep -q "offcpu': setup() failed.*tp_btf: disabled by --disable-feature" "$TMP/out" ||
      fail "error not said: $(cat "$TMP/out")"
    ! grep -qE "records 0|0 records|VERDICT|loupe report" "$TMP/out" || fail "an empty report came with the error: $(cat "$TMP/out")"
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
  grep -q "^══ syscount" "$TMP/stdout" && grep -q "^VERDICT" "$TMP/stdout" || fail "console report missing"
  python3 - "$TMP/out/records.jsonl" <<'PY' || exit 1
import json, sys
recs = [json.loads(l) for l in open(sys.argv[1])]
calls = {r["labels"].get("syscall"): r["metric"]["value"] for r in recs if r["kind"] == "metric" and r["name"] == "syscalls"}
# sh forks 7 children and waits for each one: wait4 is counted in sh (the target) only.
assert calls.get("wait4", 0) >= 7, calls
assert any(r["kind"] == "health" for r in recs), "no health records"
print("syscount ok", calls.get("wait4"))
PY
  progs_back_to "$before" || fail "BPF programs left behind: $(our_progs)"
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
  # Until its programs are loaded (a fixed sleep was too short on a busy emulated guest).
  for _ in $(seq 600); do [[ "$(our_progs)" != "$before" ]] && break; sleep 0.1; done
  [[ "$(our_progs)" != "$before" ]] || fail "no program loaded within 60 s of the start"
  kill -INT $pid
  start=$(date +%s%N)
  wait $pid; rc=$?
  took=$(( ($(date +%s%N) - start) / 1000000 ))
  expect_rc 130 $rc "SIGINT"
  # The bound docs/reliability.md states for a signal (drain_timeout is 2 s of it).
  (( took < 15000 )) || fail "SIGINT took ${took} ms"
  grep -q '"kind":"metric"' "$TMP/out/records.jsonl" || fail "interrupted run must still write its report"
  progs_back_to "$before" || fail "programs left after SIGINT: $(our_progs)"
  # SIGKILL: nothing is pinned, so the kernel frees everything with our fds.
  "$LOUPE" run "$TMP/p.toml" >/dev/null 2>&1 &
  pid=$!
  for _ in $(seq 600); do [[ "$(our_progs)" != "$before" ]] && break; sleep 0.1; done
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
  "$LOUPE" run "$TMP/p.toml" --record "$TMP/cap" -- "${LOUPE_BUILD_DIR}/bin/loupe-demo" 0.5 >/dev/null 2>"$TMP/err"
  expect_rc 0 $? "record: $(cat "$TMP/err")"
  "$LOUPE" replay "$TMP/cap" "$TMP/p.toml" -o "$TMP/replayed" 2>"$TMP/err"
  expect_rc 0 $? "replay: $(cat "$TMP/err")"
  # Every outlier event recorded live comes back, field for field, without a kernel.
  python3 - "$TMP/live/records.jsonl" "$TMP/replayed/records.jsonl" <<'PY' || exit 1
import json, sys
def events(p):
    return [json.dumps(r["event"]["fields"], sort_keys=True) for r in map(json.loads, open(p)) if r["kind"] == "event"]
live, replayed = events(sys.argv[1]), events(sys.argv[2])
# The replay's equality is the point; a few events are enough to make it mean something
# (a loaded 6.1 guest ran only 19 of the demo's 1-4 ms requests in 0.3 s, round 7).
assert len(live) >= 5, f"too few outliers recorded: {len(live)}"
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
  expect_rc 8 $? "diff of a slower run ($(cat "$TMP/slower.diff"))"
  # 15 values: p50 is judged (7 above it), p99 is not (it is the maximum).
  grep -E "latency/latency.*clock_nanosleep.*p50 .* UP" "$TMP/slower.diff" >/dev/null ||
    fail "no p50 shift flagged: $(cat "$TMP/slower.diff")"
  cat "$TMP/slower.diff"
  "$LOUPE" diff "$TMP/base" "$TMP/nowhere" >/dev/null 2>&1
  expect_rc 2 $? "diff of a missing run"
}

# Stack shares are judged by their samples: two runs of the same gzip -9 move a stack by
# several points by chance alone (~100-200 samples each), which is shown, never flagged; gzip -1
# against -9 moves the compressor's functions far past the noise, and is flagged.
case_diff_stacks() {
  need_root
  command -v gzip >/dev/null || { echo "SKIP: gzip is not installed"; exit 77; }
  seq 1 1500000 >"$TMP/data"  # compressible: -9 searches longer matches than -1
  gzip -9 -c "$TMP/data" >/dev/null  # warm: both measured runs read it from the page cache
  for run in nine nine_again one; do
    local level=-9
    [[ $run == one ]] && level=-1
    "$LOUPE" run cpu -o "$TMP/$run" -- sh -c "for i in 1 2 3 4 5; do gzip $level -c $TMP/data; done" \
      >/dev/null 2>"$TMP/$run.log" || fail "run $run: $(tail -3 "$TMP/$run.log")"
  done
  "$LOUPE" diff "$TMP/nine" "$TMP/nine_again" >"$TMP/same.diff" 2>&1
  expect_rc 0 $? "diff of two runs of the same compression ($(cat "$TMP/same.diff"))"
  "$LOUPE" diff "$TMP/nine" "$TMP/one" >"$TMP/other.diff" 2>&1
  expect_rc 8 $? "diff of gzip -9 against -1 ($(cat "$TMP/other.diff"))"
  grep -E "cpusample/cpu .* pp .*\(z -?[0-9.]+\)  " "$TMP/other.diff" >/dev/null ||
    fail "no stack flagged with its test: $(cat "$TMP/other.diff")"
  sed -n '/^stacks/,/^counters/p' "$TMP/same.diff" "$TMP/other.diff"
}

# Two CPU runs of Debian's gzip: A with the frame-pointer unwinder the bundled cpu profile
# offers (gzip has no frame pointers, so user frames come out that the symbolizer cannot
# name: "symbol": null, and no module), B with the profile unchanged (in-kernel tables). Frames
# without a name must not crash loupe diff, and --folded-diff names every frame as the
# folded sink named it in the same run.
case_diff_cpu() {
  need_root
  command -v gzip >/dev/null || { echo "SKIP: gzip is not installed"; exit 77; }
  head -c 12000000 /dev/urandom | base64 >"$TMP/data"
  sed 's/^name = "cpusample"/&\nunwind = "fp"/' "$SRC/profiles/cpu.toml" >"$TMP/cpu-fp.toml"
  grep -q '^unwind = "fp"' "$TMP/cpu-fp.toml" || fail "profiles/cpu.toml has no cpusample to set"
  for run in A B; do
    rm -f "$TMP/data.gz"
    profile="$TMP/cpu-fp.toml"
    [[ $run == B ]] && profile="$SRC/profiles/cpu.toml"
    "$LOUPE" run "$profile" -o "$TMP/$run" -- gzip -k "$TMP/data" >"$TMP/$run.log" 2>&1
    expect_rc 0 $? "cpu run $run: $(tail -3 "$TMP/$run.log")"
  done
  python3 - "$TMP/A/records.jsonl" <<'PY' || exit 1
import json, sys
nulls = sum(1 for l in open(sys.argv[1]) for r in [json.loads(l)]
            if r["kind"] == "stack" and r["is_final"]
            for f in r["stack"]["frames"] if f["symbol"] is None)
assert nulls, "no frame without a symbol: this run does not test what it is meant to"
print("frames without a symbol in run A:", nulls)
PY
  "$LOUPE" diff "$TMP/A" "$TMP/B" --folded-diff "$TMP/ab.folded" >"$TMP/ab.diff" 2>&1; rc=$?
  [[ $rc -eq 0 || $rc -eq 8 ]] || fail "diff A B: exit $rc: $(tail -5 "$TMP/ab.diff")"
  grep -qE "^[0-9]+ changes? flagged" "$TMP/ab.diff" || fail "diff A B: $(cat "$TMP/ab.diff")"
  "$LOUPE" diff "$TMP/A" "$TMP/A" --folded-diff "$TMP/aa.folded" >"$TMP/aa.diff" 2>&1
  expect_rc 0 $? "diff A A ($(tail -5 "$TMP/aa.diff"))"
  grep -q "^0 changes flagged" "$TMP/aa.diff" || fail "diff A A: $(cat "$TMP/aa.diff")"
  python3 - "$TMP/A/cpu.folded" "$TMP/aa.folded" "$TMP/ab.folded" "$TMP/B/cpu.folded" <<'PY' || exit 1
import collections, sys
def folded(path):  # "stack count"
    out = collections.Counter()
    for line in open(path):
        stack, n = line.rstrip("\n").rsplit(" ", 1)
        out[stack] += int(n)
    return out
def diff(path):  # "stack base new"
    out = {}
    for line in open(path):
        stack, a, b = line.rstrip("\n").rsplit(" ", 2)
        out[stack] = (int(a), int(b))
    return out
a, aa, ab, b = folded(sys.argv[1]), diff(sys.argv[2]), diff(sys.argv[3]), folded(sys.argv[4])
assert all(x == y for x, y in aa.values()), "diff A A: a stack differs from itself"
# The same stacks under the same names as the folded sink's: unnamed frames are the
# module's file name + offset, or [unknown] without a module, never null.
want = {s: n for s, n in a.items() if n}
got = {s: x for s, (x, _) in aa.items() if x}
assert got == want, f"A's stacks differ from A's cpu.folded: {sorted(set(got) ^ set(want))[:5]}"
assert {s: x for s, (x, _) in ab.items() if x} == want and \
       {s: y for s, (_, y) in ab.items() if y} == {s: n for s, n in b.items() if n}, "diff A B"
assert not any("null" in f for s in ab for f in s.split(";")), "a frame named null"
unnamed = [f for s in want for f in s.split(";") if f == "[unknown]" or "+0x" in f]
assert unnamed, "no unsymbolized frame in the diff"
print(f"diff of two gzip runs: {len(ab)} stacks, {len(unnamed)} unsymbolized frames named as cpu.folded names them")
PY
}

# The command's exit status is loupe's when loupe did its part (like strace and time);
# loupe's own failure outranks it; a command loupe ends at --duration is not a failure.
case_exit_status() {
  need_root
  cat >"$TMP/p.toml" <<TOML
[session]
output_dir = "$TMP/out"
[[plugins]]
name = "syscount"
[[sinks]]
name = "jsonl"
TOML
  "$LOUPE" run "$TMP/p.toml" -- true 2>"$TMP/err"
  expect_rc 0 $? "-- true ($(cat "$TMP/err"))"
  "$LOUPE" run "$TMP/p.toml" -- sh -c 'exit 3' 2>"$TMP/err"
  expect_rc 3 $? "-- sh -c 'exit 3' ($(cat "$TMP/err"))"
  grep -q "exited with status 3" "$TMP/err" || fail "status not said: $(cat "$TMP/err")"
  [[ -s "$TMP/out/records.jsonl" ]] || fail "no report for a command that failed"
  "$LOUPE" run "$TMP/p.toml" -- sh -c 'exit 77' 2>/dev/null
  expect_rc 77 $? "-- sh -c 'exit 77'"
  "$LOUPE" run "$TMP/p.toml" -- sh -c 'kill -USR1 $$' 2>/dev/null
  expect_rc $((128 + 10)) $? "a command killed by SIGUSR1"
  "$LOUPE" run "$TMP/p.toml" --duration 0.5 -- sleep 30 2>"$TMP/err"
  expect_rc 0 $? "a command ended at --duration ($(cat "$TMP/err"))"
  # loupe's own failure wins over the command's status.
  sed 's/"syscount"/"syscuont"/' "$TMP/p.toml" >"$TMP/bad.toml"
  "$LOUPE" run "$TMP/bad.toml" -- sh -c 'exit 3' 2>"$TMP/err"
  expect_rc 4 $? "a missing plugin with a failing command ($(cat "$TMP/err"))"
}

# A system-wide run profiles the machine, not loupe: its own threads (the session loop
# wakes every 20 ms, ring readers, the symbolizer) blocked 50 times a second in every
# offcpu report (issue 32). Another process blocking meanwhile is still there.
case_system_wide_not_self() {
  need_root
  cat >"$TMP/p.toml" <<TOML
[session]
output_dir = "$TMP/out"
[[plugins]]
name = "offcpu"
min_block_ns = 1000
wakers = false
[[sinks]]
name = "jsonl"
TOML
  (for i in $(seq 40); do sleep 0.05; done) &
  sleeper=$!
  "$LOUPE" run "$TMP/p.toml" --duration 1.5 2>"$TMP/err" &
  loupe=$!
  wait $loupe
  expect_rc 0 $? "system-wide offcpu ($(cat "$TMP/err"))"
  kill $sleeper 2>/dev/null; wait $sleeper 2>/dev/null
  python3 - "$TMP/out/records.jsonl" "$loupe" <<'PY' || exit 1
import json, sys
pids = {}
for line in open(sys.argv[1]):
    r = json.loads(line)
    if r.get("kind") == "stack" and r.get("name") == "offcpu" and r.get("is_final"):
        l = r.get("labels", {})
        pids[l.get("pid")] = l.get("comm")
assert pids, "no offcpu stacks at all"
assert sys.argv[2] not in pids, f"loupe's own pid {sys.argv[2]} is in the report: {pids[sys.argv[2]]}"
assert "sleep" in pids.values(), f"the sleepers are missing: {sorted(set(pids.values()))[:20]}"
print(f"{len(pids)} processes blocked, loupe ({sys.argv[2]}) not among them")
PY
}

# README command 1 as scripts/demo.sh runs it: the report fits a screen (<= 60 lines of
# stdout) and hides no figure: every non-zero metric of the same run's jsonl stands in its
# producer's section, under its column, in the row of its labels.
case_profiles_by_name() {
  # The user's real ~/.config must not change what this test sees.
  export XDG_CONFIG_HOME="$TMP/config"
  unset LOUPE_PROFILE_PATH
  "$LOUPE" profiles >"$TMP/list" || fail "loupe profiles"
  for n in cpu offcpu; do
    first=$(sed -n '1s/^#[[:space:]]*//p' "$SRC/profiles/$n.toml")
    [[ -n $first ]] || fail "$n.toml no longer starts with a comment line"
    grep -E "^$n +build tree +" "$TMP/list" | grep -qF "$first" ||
      fail "$n not listed from the build tree with '$first':
$(cat "$TMP/list")"
  done
  "$LOUPE" profiles --json | python3 -c '
import json, sys
d = json.load(sys.stdin)
p = {x["name"]: x for x in d["profiles"]}
assert p["cpu"]["origin"] == "build tree" and p["cpu"]["path"].endswith("/profiles/cpu.toml"), p["cpu"]
assert [x["origin"] for x in d["search_dirs"]] == ["user", "build tree"], d["search_dirs"]' ||
    fail "profiles --json"
  "$LOUPE" validate cpu >"$TMP/out" || fail "validate by name"
  grep -qx "$SRC/profiles/cpu.toml: ok" "$TMP/out" || fail "validate cpu read: $(cat "$TMP/out")"

  # A user's copy comes first, and every command reads it: this one does not parse.
  mkdir -p "$TMP/config/loupe/profiles"
  printf '# my cpu\n[session\n' >"$TMP/config/loupe/profiles/cpu.toml"
  "$LOUPE" profiles | grep -E "^cpu +user +my cpu \[shadows build tree\]" >/dev/null ||
    fail "user's cpu must shadow the build tree's: $("$LOUPE" profiles)"
  for cmd in "validate cpu" "run cpu --duration 1" "bench cpu" "replay $TMP/none.cap cpu"; do
    # shellcheck disable=SC2086
    "$LOUPE" $cmd 2>"$TMP/err" >/dev/null; rc=$?
    expect_rc 3 $rc "loupe $cmd with a broken user copy"
    grep -q "^$TMP/config/loupe/profiles/cpu.toml:2:" "$TMP/err" || fail "loupe $cmd: $(cat "$TMP/err")"
  done
  # LOUPE_PROFILE_PATH comes before the user's directory.
  mkdir -p "$TMP/env"
  cp "$SRC/profiles/cpu.toml" "$TMP/env/cpu.toml"
  LOUPE_PROFILE_PATH="$TMP/env" "$LOUPE" validate cpu | grep -qx "$TMP/env/cpu.toml: ok" ||
    fail "LOUPE_PROFILE_PATH must come first"

  # A misspelt name: the profile error's code, a guess, and the names there are.
  for cmd in "run ofcpu -- true" "validate ofcpu" "bench ofcpu" "replay $TMP/none.cap ofcpu"; do
    # shellcheck disable=SC2086
    "$LOUPE" $cmd 2>"$TMP/err"; rc=$?
    expect_rc 3 $rc "loupe $cmd"
    grep -q "no profile named 'ofcpu'; did you mean 'offcpu'?" "$TMP/err" || fail "loupe $cmd: $(cat "$TMP/err")"
    grep -qE "profiles: .*cpu, .*offcpu" "$TMP/err" || fail "loupe $cmd lists no profiles: $(cat "$TMP/err")"
  done
  # A path stays a path, with the message it always had.
  "$LOUPE" validate nope.toml 2>"$TMP/err"; rc=$?
  expect_rc 3 $rc "missing path"
  grep -qx "nope.toml: error: cannot read profile: no such file" "$TMP/err" || fail "path: $(cat "$TMP/err")"
}

case_demo() {
  need_root
  cd "$TMP" || exit 1
  "$LOUPE" run "$SRC/profiles/default.toml" -- "${LOUPE_BUILD_DIR}/bin/loupe-demo" 3 >"$TMP/stdout" 2>"$TMP/stderr"
  expect_rc 0 $? "demo: $(cat "$TMP/stderr")"
  grep -q "loupe report" "$TMP/stdout" || fail "no report"
  grep -q "VERDICT" "$TMP/stdout" || fail "no health verdict"
  [[ -s "$TMP/loupe-out/records.jsonl" ]] || fail "no jsonl"
  cat "$TMP/stdout"
  lines=$(wc -l <"$TMP/stdout")
  ((lines <= 60)) || fail "the demo report is $lines lines, more than 60"
  python3 - "$TMP/loupe-out/records.jsonl" "$TMP/stdout" <<'PY' || exit 1
import json, math, re, sys
recs = [json.loads(l) for l in open(sys.argv[1])]
text = open(sys.argv[2], encoding="utf-8").read().splitlines()

def section(plugin):
    out, inside = [], False
    for l in text:
        m = re.match(r"^══ (\S+)", l)
        if m:
            inside = m.group(1) == plugin
        if inside:
            out.append(l)
    return out

def number(v):  # human_units.cpp format_number
    if v == math.floor(v) and abs(v) < 1e15:
        return ("-" if v < 0 else "") + f"{int(abs(v)):,}"
    return f"{v:.6g}"

def three(x, suffix):
    a = abs(x)
    return (f"{x:.2f}" if a < 10 else f"{x:.1f}" if a < 100 else f"{x:.0f}") + " " + suffix

def quantity(v, unit):  # human_units.cpp format_quantity
    scale = {"ns": 1, "us": 1e3, "ms": 1e6, "s": 1e9}
    if unit in scale:
        ns = v * scale[unit]
        names = [(1e9, "s"), (1e6, "ms"), (1e3, "µs")]
        for step, name in names:
            if abs(ns) >= step:
                return three(ns / step, name)
        return f"{ns:.0f} ns" if ns == math.floor(ns) else three(ns, "ns")
    if unit in ("bytes", "B", "byte"):
        for step, name in [(1024.0**4, "TiB"), (1024.0**3, "GiB"), (1024.0**2, "MiB"), (1024.0, "KiB")]:
            if abs(v) >= step:
                return three(v / step, name)
        return f"{v:.0f} B"
    if unit == "ratio":
        return number(v * 100) + "%"
    return number(v) + ("" if unit in (None, "", "count") else " " + unit)

def tokens(line):
    return line.split()

checked = 0
left_out = {}  # (plugin, header, "… N more row(s)" line) -> label values not shown
for r in recs:
    if r["kind"] != "metric" or not r["is_final"]:
        continue
    v = r["metric"]["value"]
    if v is None or v == 0:
        continue
    want = quantity(v, r["metric"]["unit"])
    sec = section(r["plugin"])
    assert sec, f"no section for {r['plugin']} (metric {r['name']} = {want})"
    labels = list(r["labels"].values())
    if not labels:
        assert any(f"{r['name']} {want}" in l for l in sec), \
            f"{r['plugin']}/{r['name']} = {want} is not in its section:\n" + "\n".join(sec)
        checked += 1
        continue
    # The table whose header names the metric; the row that holds every label value.
    header = next((i for i, l in enumerate(sec)
                   if r["name"] in tokens(l) and all(k in tokens(l) for k in r["labels"])), None)
    assert header is not None, f"no column {r['name']} in {r['plugin']}:\n" + "\n".join(sec)
    end = re.search(r"(?<!\S)" + re.escape(r["name"]) + r"(?!\S)", sec[header]).end()
    table = []
    for l in sec[header + 1:]:
        if not l.strip():
            break
        table.append(l)
    rows = [l for l in table if all(x in tokens(l) for x in labels)]
    if not rows:
        # Beyond the console's top: the table must say how many rows it left out, and
        # they are checked against the records below.
        more = next((l for l in table if re.match(r"^  … \d+ more row", l)), None)
        assert more, f"no row {r['labels']} under {sec[header]!r}, and no rows left out"
        left_out.setdefault((r["plugin"], header, more), set()).add(tuple(labels))
        continue
    # Values are right-aligned: the figure ends where its column's name ends.
    assert any(l[:end].endswith(want) for l in rows), \
        f"{r['plugin']}/{r['name']}{r['labels']} = {want} not under its column:\n" + \
        sec[header] + "\n" + "\n".join(rows)
    checked += 1

for (plugin, header, more), rows in left_out.items():
    n = int(re.match(r"^  … (\d+) more row", more).group(1))
    assert n == len(rows), f"{plugin}: {more!r} but {len(rows)} rows are not shown: {rows}"
    checked += 1

# Histograms: a summary line each, but for the ones a line counts as not drawn.
drawn = {}
for r in recs:
    if r["kind"] == "histogram" and r["is_final"] and r["histogram"]["count"]:
        name = r["name"] + "{" + ",".join(f"{k}={v}" for k, v in r["labels"].items()) + "}"
        want = f"{name}  count {number(r['histogram']['count'])}"
        found = any(want in l for l in section(r["plugin"]))
        drawn.setdefault((r["plugin"], r["name"]), []).append(found)
        checked += found
for (plugin, name), found in drawn.items():
    missing = found.count(False)
    if missing:
        want = f"… {missing} more {name} histogram(s) not drawn"
        assert any(want in l for l in section(plugin)), f"no summary line {want!r}"
assert checked >= 10, f"only {checked} figures checked: the run measured too little"
print(f"demo report: {len(text)} lines, {checked} non-zero figures found in place")
PY
}

# With an interval and a terminal, the console redraws one screen in place (like perf top)
# and leaves the final report at the end; the terminal is a tmux pane, read twice.
case_live_view() {
  need_root
  command -v tmux >/dev/null ||
    { echo "SKIP: tmux is not installed (scripts/install-deps.sh installs it)"; exit 77; }
  cat >"$TMP/live.toml" <<TOML
[session]
interval = 1.0
output_dir = "$TMP/out"
[[plugins]]
name = "syscount"
[[sinks]]
name = "console"
TOML
  sock="$TMP/tmux.sock"
  trap 'tmux -S "$sock" kill-server 2>/dev/null; rm -rf "$TMP"' EXIT
  tmux -S "$sock" new-session -d -x 120 -y 50 \
    "env LOUPE_PLUGIN_DIR='$LOUPE_PLUGIN_DIR' '$LOUPE' run '$TMP/live.toml' -- '${LOUPE_BUILD_DIR}/bin/loupe-demo' 10; echo LIVE-DONE; sleep 60" ||
    fail "tmux did not start"
  # Screens are read when they hold a whole frame, not at fixed times: start-up under
  # emulation (the kernel matrix's guests) takes seconds of its own, and a terminal shows a
  # frame as the pty delivers it, so a capture can land between its header and the rest
  # (seen on 6.1 under TCG). A frame is whole once its last line, the verdict, is drawn.
  frame_no() {
    grep -q '^VERDICT so far' "$1" || return 0
    sed -n 's/.*loupe interval #\([0-9]*\).*/\1/p' "$1" | head -n 1
  }
  for _ in $(seq 100); do
    tmux -S "$sock" capture-pane -p >"$TMP/screen1"
    [ -n "$(frame_no "$TMP/screen1")" ] && break
    sleep 0.2
  done
  for _ in $(seq 100); do
    sleep 0.2
    tmux -S "$sock" capture-pane -p >"$TMP/screen2"
    n2=$(frame_no "$TMP/screen2")
    [ -n "$n2" ] && [ "$n2" -gt "$(frame_no "$TMP/screen1")" ] && break
  done
  for _ in $(seq 120); do
    tmux -S "$sock" capture-pane -p >"$TMP/screen3"
    grep -q LIVE-DONE "$TMP/screen3" && break
    sleep 0.5
  done
  for n in 1 2 3; do echo "--- screen $n"; cat "$TMP/screen$n"; done
  python3 - "$TMP/screen1" "$TMP/screen2" "$TMP/screen3" <<'PY' || exit 1
import re, sys
screens = [open(p, encoding="utf-8").read().splitlines() for p in sys.argv[1:]]
numbers = []
for s in screens[:2]:
    heads = [l for l in s if "loupe interval #" in l]
    # One report on the screen, drawn from its first line: redrawn, not scrolled.
    assert len(heads) == 1, f"{len(heads)} interval headers on one screen:\n" + "\n".join(s)
    assert "loupe interval #" in s[0], f"the frame does not start at the top: {s[0]!r}"
    assert "elapsed · every 1.00 s" in s[0], s[0]
    assert any(l.startswith("══ syscount") for l in s), "no syscount section in the frame"
    numbers.append(int(re.search(r"interval #(\d+)", heads[0]).group(1)))
assert numbers[1] > numbers[0], f"the screen was not redrawn: interval #{numbers[0]} then #{numbers[1]}"
final = screens[2]
assert any("LIVE-DONE" in l for l in final), "loupe did not finish"
assert any("loupe report" in l for l in final), "no final report:\n" + "\n".join(final)
assert any(l.startswith("VERDICT") for l in final), "no verdict in the final report"
# The report follows the last frame (what the target printed meanwhile stays on screen).
last_frame = max(i for i, l in enumerate(final + ["loupe interval #"]) if "loupe interval #" in l)
report = next(i for i, l in enumerate(final) if "loupe report" in l)
assert report > last_frame or last_frame == len(final), "the report is not after the last frame"
print(f"live view ok: interval #{numbers[0]} then #{numbers[1]}, final report at the end")
PY
}

"case_$1"
