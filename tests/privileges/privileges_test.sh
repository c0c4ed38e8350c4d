#!/usr/bin/env bash
# Privileges and signals, through the real CLI. Usage: privileges_test.sh <case>. 77 = skipped.
set -uo pipefail
LOUPE=${LOUPE_BIN:?}
TMP=$(mktemp -d /tmp/loupe-priv.XXXXXX)
trap 'rm -rf "$TMP"' EXIT
chmod 0755 "$TMP"  # the unprivileged runs below must read the profile
fail() { echo "FAIL: $*" >&2; exit 1; }
skip() { echo "SKIP: $*"; exit 77; }
need_root() { [[ $(id -u) -eq 0 ]] || skip "needs root"; }
NOBODY_UID=$(id -u nobody 2>/dev/null) || skip "no user 'nobody'"
# CAP_DAC_READ_SEARCH, CAP_SYS_PTRACE, CAP_SYSLOG, CAP_CHECKPOINT_RESTORE (+ CAP_KILL with a command)
KEEP_MASK=$(( (1 << 2) | (1 << 19) | (1 << 34) | (1 << 40) | (1 << 5) ))
ATTACH_CAPS=$(( (1 << 21) | (1 << 38) | (1 << 39) ))  # CAP_SYS_ADMIN, CAP_PERFMON, CAP_BPF

profile() { # duration
  cat >"$TMP/p.toml" <<TOML
[session]
duration = $1
output_dir = "$TMP/out"
[[plugins]]
name = "syscount"
[[sinks]]
name = "jsonl"
TOML
}

our_progs() {
  bpftool prog show 2>/dev/null | awk '/^[0-9]+:/ {print $1, $4}' | grep -E ' syscount_' | sort || true
}

# Waits until the session says it runs (-v log), then checks every thread of loupe.
# $1 = pid, $2 = expected uid. Prints the main thread's CapEff.
check_threads() {
  local pid=$1 uid=$2 t st eff prm uids
  for _ in $(seq 200); do grep -q "session running" "$TMP/loupe.log" && break; sleep 0.05; done
  grep -q "session running" "$TMP/loupe.log" || fail "session never ran: $(cat "$TMP/loupe.log")"
  # The session's worker threads start around the "session running" line; an emulated
  # kernel (the matrix guests) can show the main thread alone for a while: look again.
  local n=0 try
  for try in $(seq 100); do
    n=0
    for t in /proc/$pid/task/*; do
      # One read per thread: a thread that ends between two reads (short-lived helper
      # threads do, and a slow kernel widens the window) is skipped, not half-read.
      st=$(cat "$t/status" 2>/dev/null) || continue
      eff=$(awk '/^CapEff:/ {print $2}' <<<"$st")
      [[ -n $eff ]] || continue
      prm=$(awk '/^CapPrm:/ {print $2}' <<<"$st")
      uids=$(awk '/^Uid:/ {print $2, $3, $4, $5}' <<<"$st")
      (( (0x$eff | 0x$prm) & ~KEEP_MASK )) && fail "thread ${t##*/} kept capabilities: CapEff=$eff CapPrm=$prm"
      (( 0x$eff & ATTACH_CAPS )) && fail "thread ${t##*/} kept CAP_BPF/CAP_PERFMON/CAP_SYS_ADMIN: $eff"
      [[ $uids == "$uid $uid $uid $uid" ]] || fail "thread ${t##*/} runs as '$uids', expected $uid"
      n=$((n + 1))
    done
    (( n >= 2 )) && break
    sleep 0.05
  done
  (( n >= 2 )) || fail "expected the session's threads, saw $n"
  echo "$n threads: uid $uid, CapEff $(awk '/^CapEff:/ {print $2}' /proc/$pid/status)"
}

check_outputs() { # owner uid
  [[ $(stat -c %a "$TMP/out") == 700 ]] || fail "output dir mode $(stat -c %a "$TMP/out"), expected 700"
  [[ $(stat -c %u "$TMP/out") == "$1" ]] || fail "output dir owner $(stat -c %u "$TMP/out"), expected $1"
  [[ $(stat -c %a "$TMP/out/records.jsonl") == 600 ]] || fail "records.jsonl mode $(stat -c %a "$TMP/out/records.jsonl")"
  grep -q '"plugin":"syscount"' "$TMP/out/records.jsonl" || fail "no syscount records written"
}

case_missing_capabilities() {
  need_root
  command -v setpriv >/dev/null || skip "setpriv (util-linux) not installed"
  profile 1
  setpriv --reuid="$NOBODY_UID" --regid="$NOBODY_UID" --clear-groups --inh-caps=-all --bounding-set=-all \
    "$LOUPE" run "$TMP/p.toml" >"$TMP/loupe.log" 2>&1
  rc=$?
  [[ $rc -eq 6 ]] || fail "exit $rc, expected 6: $(cat "$TMP/loupe.log")"
  for cap in CAP_BPF CAP_PERFMON CAP_SYS_ADMIN; do
    grep -q "$cap" "$TMP/loupe.log" || fail "message does not name $cap: $(cat "$TMP/loupe.log")"
  done
  [[ -e "$TMP/out" ]] && fail "nothing may be created before the privilege check"
  # Root whose bounding set lacks the BPF capabilities is refused the same way.
  setpriv --inh-caps=-all --bounding-set=-bpf,-perfmon,-sys_admin "$LOUPE" run "$TMP/p.toml" >"$TMP/loupe.log" 2>&1
  rc=$?
  [[ $rc -eq 6 ]] || fail "root without CAP_BPF: exit $rc, expected 6: $(cat "$TMP/loupe.log")"
  grep -q "CAP_BPF" "$TMP/loupe.log" || fail "message does not name CAP_BPF"
  echo "missing capabilities ok"
}

case_user_switch() {
  need_root
  profile 8
  "$LOUPE" -v run "$TMP/p.toml" --user nobody >"$TMP/loupe.log" 2>&1 &
  pid=$!
  check_threads $pid "$NOBODY_UID"
  wait $pid; rc=$?
  [[ $rc -eq 0 ]] || fail "exit $rc: $(cat "$TMP/loupe.log")"
  check_outputs "$NOBODY_UID"
  # An unknown user is refused before anything is attached.
  "$LOUPE" run "$TMP/p.toml" --user loupe-no-such-user >"$TMP/bad.log" 2>&1
  rc=$?
  [[ $rc -eq 2 ]] || fail "unknown user: exit $rc, expected 2"
  grep -q "no such user 'loupe-no-such-user'" "$TMP/bad.log" || fail "unknown user message: $(cat "$TMP/bad.log")"
  echo "user switch ok"
}

case_drop_without_user() {
  need_root
  profile 8
  "$LOUPE" -v run "$TMP/p.toml" >"$TMP/loupe.log" 2>&1 &
  pid=$!
  check_threads $pid 0
  wait $pid; rc=$?
  [[ $rc -eq 0 ]] || fail "exit $rc: $(cat "$TMP/loupe.log")"
  check_outputs 0
  # With a command, CAP_KILL stays so loupe can still stop it; the command itself keeps root.
  # The command lasts until the checks are done (an emulated kernel takes seconds to
  # attach, and the checks fork awk per thread): a fixed sleep raced them there.
  "$LOUPE" -v run "$TMP/p.toml" -d 60 -- sh -c "while [ ! -e '$TMP/done' ]; do sleep 0.1; done" \
    >"$TMP/loupe.log" 2>&1 &
  pid=$!
  check_threads $pid 0 >/dev/null
  eff=$(awk '/^CapEff:/ {print $2}' /proc/$pid/status)
  touch "$TMP/done"
  (( 0x$eff & (1 << 5) )) || fail "CAP_KILL dropped although loupe started the command: $eff"
  wait $pid; rc=$?
  [[ $rc -eq 0 ]] || fail "with a command: exit $rc: $(cat "$TMP/loupe.log")"
  echo "drop without user ok"
}

case_sigterm() {
  need_root
  before=$(our_progs)
  profile 60
  "$LOUPE" -v run "$TMP/p.toml" >"$TMP/loupe.log" 2>&1 &
  pid=$!
  for _ in $(seq 200); do grep -q "session running" "$TMP/loupe.log" && break; sleep 0.05; done
  [[ "$(our_progs)" != "$before" ]] || fail "no program loaded while running"
  kill -TERM $pid
  start=$(date +%s%N)
  wait $pid; rc=$?
  took=$(( ($(date +%s%N) - start) / 1000000 ))
  [[ $rc -eq 130 ]] || fail "SIGTERM: exit $rc, expected 130: $(tail -5 "$TMP/loupe.log")"
  # drain_timeout is 2 s and the final sink flush 10 s: far inside on an idle box.
  (( took < 15000 )) || fail "SIGTERM took ${took} ms"
  grep -q '"is_final":true' "$TMP/out/records.jsonl" ||
    fail "interrupted run must still write its final report"
  # A tp_btf program is freed after its link's RCU grace period, a few ms after loupe.
  for _ in $(seq 100); do [[ "$(our_progs)" == "$before" ]] && break; sleep 0.05; done
  [[ "$(our_progs)" == "$before" ]] || fail "programs left after SIGTERM: $(our_progs)"
  echo "sigterm ok (${took} ms)"
}

"case_$1"
