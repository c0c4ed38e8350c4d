#!/usr/bin/env bash
# Installs the package and runs what loupe.service runs, from the installed paths only.
# Runs as root inside a scripts/vmtest.sh guest, whose root is a throwaway overlay of this
# machine's (so `dpkg -i` changes nothing here). Usage: in_guest.sh DEB
set -uo pipefail
deb=$(realpath "${1:?usage: in_guest.sh DEB}")
fail() { echo "FAIL (in guest, $(uname -r)): $*" >&2; exit 1; }
[[ $(id -u) -eq 0 ]] || fail "needs root"
# The build tree must play no part: nothing may point loupe at it.
unset LOUPE_PLUGIN_PATH LOUPE_PROFILE_PATH
export XDG_CONFIG_HOME=/tmp/no-user-config
cd /tmp || fail "no /tmp"

t0=$(date +%s%N)
dpkg -i "$deb" >/tmp/dpkg.log 2>&1 || { cat /tmp/dpkg.log; fail "dpkg -i $deb"; }
echo "dpkg -i: $((($(date +%s%N) - t0) / 1000000)) ms"
dpkg -s loupe | grep -q '^Status: install ok installed' || fail "dpkg -s loupe: not installed"
loupe=$(command -v loupe) || fail "loupe not on PATH after install"
[[ $loupe == /usr/bin/loupe ]] || fail "loupe is $loupe, not the package's /usr/bin/loupe"

# The installed loupe finds the installed plugins and profiles, and nothing else.
"$loupe" list --json >/tmp/list.json || fail "loupe list"
python3 - /tmp/list.json <<'PY' || fail "loupe list: the installed plugins"
import json, subprocess, sys
d = json.load(open(sys.argv[1]))
assert not d["rejected"], d["rejected"]
shipped = {l.split("/")[-1] for l in subprocess.run(["dpkg", "-L", "loupe"], capture_output=True,
           text=True, check=True).stdout.split() if l.startswith("/usr/lib/loupe/plugins/loupe-")}
found = {p["path"].split("/")[-1] for p in d["plugins"]}
paths = {p["path"].rsplit("/", 1)[0] for p in d["plugins"]}
assert paths == {"/usr/lib/loupe/plugins"}, paths
assert found == shipped, (found ^ shipped)
print(f"loupe list: the {len(found)} plugins and sinks the package ships")
PY
"$loupe" profiles >/tmp/profiles || fail "loupe profiles"
grep -qE "^agent +installed +" /tmp/profiles || fail "agent is not installed: $(cat /tmp/profiles)"
grep -q "installed  *$(dirname "$loupe" | sed 's|/bin$||')/share/loupe/profiles$" /tmp/profiles ||
  fail "installed profiles not searched: $(cat /tmp/profiles)"
grep -q "build tree" /tmp/profiles && fail "an installed loupe searched a build tree: $(cat /tmp/profiles)"

unit=/usr/lib/systemd/system/loupe.service
[[ -f $unit ]] || fail "no $unit"
if command -v systemd-analyze >/dev/null; then
  # verify exits 0 on unknown keys and bad values: they only print, so any output fails.
  out=$(systemd-analyze verify "$unit" 2>&1) || fail "systemd-analyze verify: $out"
  [[ -z $out ]] || fail "systemd-analyze verify: $out"
  echo "systemd-analyze verify $unit: clean"
else
  echo "SKIP systemd-analyze verify: not installed"
fi

# What the unit runs, as systemd would start it (no systemd here): its environment, its
# command line with %S expanded, and no capability outside its bounding set.
caps=$(sed -n 's/^CapabilityBoundingSet=//p' "$unit")
[[ -n $caps ]] || fail "the unit sets no CapabilityBoundingSet"
bounding="-all"
for c in $caps; do bounding+=",+$(echo "${c#CAP_}" | tr '[:upper:]' '[:lower:]')"; done
exec_start=$(sed -n 's/^ExecStart=//p' "$unit")
exec_start=${exec_start//%S//var/lib}
# (No process substitution: the guest's /dev has no /dev/fd.)
unit_env=()
while read -r assignment; do unit_env+=("${assignment//%C//var/cache}"); done <<<"$(sed -n 's/^Environment=//p' "$unit")"
[[ ${unit_env[*]} == *LOUPE_PROFILE_PATH=* ]] || fail "the unit sets no LOUPE_PROFILE_PATH: ${unit_env[*]}"
as_unit() {
  env "${unit_env[@]}" setpriv --bounding-set "$bounding" --inh-caps -all -- "$@"
}
as_unit "$loupe" check >/tmp/check.txt; rc=$?
cat /tmp/check.txt
[[ $rc -eq 0 ]] || fail "loupe check with the unit's capabilities ($caps): exit $rc"
if grep -E '^  (perf_event|tracepoint|uprobe) ' /tmp/check.txt | grep -v ' yes '; then
  fail "the unit's capabilities leave the agent's attach kinds unusable (above)"
fi
# Why the unit keeps CAP_SYS_ADMIN (its comment): what this kernel says without it.
caps_wo_admin=${bounding/,+sys_admin/}
echo "without CAP_SYS_ADMIN: $(env setpriv --bounding-set "$caps_wo_admin" --inh-caps -all -- \
  "$loupe" check | grep -E '^  perf_event ')"

# An override in /etc/loupe/profiles (the unit's LOUPE_PROFILE_PATH) wins over the package's.
mkdir -p /etc/loupe/profiles
sed 's/^frequency = .*/frequency = 49/' /usr/share/loupe/profiles/agent.toml >/etc/loupe/profiles/agent.toml
as_unit "$loupe" profiles | grep -qE "^agent +LOUPE_PROFILE_PATH +.*\[shadows installed\]" ||
  fail "/etc/loupe/profiles/agent.toml does not shadow the installed one"
rm -rf /etc/loupe

mkdir -p /var/lib/loupe
# Something on the CPU for the system-wide sampler to find, under a name of its own.
cp /bin/dash /tmp/loupespin
timeout 60 /tmp/loupespin -c 'while :; do :; done' &
spin=$!
# shellcheck disable=SC2086
as_unit $exec_start --duration 5 >/tmp/agent.log 2>&1 &
agent=$!
scraped=""
for _ in $(seq 1 120); do
  if curl -sf http://127.0.0.1:9750/metrics >/tmp/metrics 2>/dev/null; then scraped=yes; break; fi
  kill -0 $agent 2>/dev/null || break
  sleep 0.5
done
wait $agent; rc=$?
kill $spin 2>/dev/null
tail -n 30 /tmp/agent.log
[[ $rc -eq 0 ]] || fail "'$exec_start --duration 5' with the unit's capabilities: exit $rc"
[[ -n $scraped ]] || fail "/metrics never answered while the agent ran"
grep -q '^loupe_up 1' /tmp/metrics || fail "no loupe_up 1 on /metrics: $(head /tmp/metrics)"
for f in cpu.pb.gz offcpu.pb.gz cpu.folded offcpu.folded; do
  [[ -s /var/lib/loupe/$f ]] || fail "no /var/lib/loupe/$f: $(ls -la /var/lib/loupe)"
done
grep -q '^loupespin;' /var/lib/loupe/cpu.folded ||
  fail "the spinning process is not in cpu.folded: $(head -n 5 /var/lib/loupe/cpu.folded)"
# The agent rotates: the window its stop ended is published whole beside the session files.
window=$(ls -d /var/lib/loupe/windows/2* 2>/dev/null | tail -n 1)
[[ -n $window && -s $window/cpu.pb.gz && -s $window/window.json ]] ||
  fail "no window with cpu.pb.gz under /var/lib/loupe/windows: $(ls -laR /var/lib/loupe/windows 2>&1 | head)"
samples=$(awk '{n += $NF} END {print n + 0}' /var/lib/loupe/cpu.folded)
echo "agent: $samples CPU samples in cpu.folded, outputs: $(ls /var/lib/loupe | tr '\n' ' ')"
echo "package ok in the guest ($(uname -r))"
