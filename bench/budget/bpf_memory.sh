#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
#
# The kernel memory a profile locks in BPF maps, as anyone can check it from outside: the
# bundled agent profile (or PROFILE) runs system-wide, and once its session is running
# every map it holds is read from /proc/PID/fdinfo (memlock, the kernel's own figure),
# each map once however many objects share it. Prints the maps largest first and the
# total in MiB; with LIMIT_MIB, exits 1 when the total is above it.
#
#   bench/budget/bpf_memory.sh BUILD_DIR [PROFILE=agent] [LIMIT_MIB]
#
# Root only.
set -uo pipefail
build=$(cd "${1:?usage: bpf_memory.sh BUILD_DIR [PROFILE] [LIMIT_MIB]}" && pwd)
profile=${2:-agent}
limit=${3:-}
loupe=$build/bin/loupe
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"; kill $(jobs -p) 2>/dev/null' EXIT

root=$(cd "$(dirname "$0")/../.." && pwd)
# The profile's plugins as bundled, its sinks left out (they hold no BPF map, and the
# agent's /metrics port may be taken by a test beside this one): one jsonl file instead.
src=$profile
[ -f "$src" ] || src=$root/profiles/$profile.toml
awk '/^\[\[sinks\]\]/{exit} {print}' "$src" >"$tmp/profile.toml"
printf '[[sinks]]\nname = "jsonl"\n' >>"$tmp/profile.toml"
"$loupe" -v run "$tmp/profile.toml" --duration 30 --output "$tmp/out" >"$tmp/out.log" 2>&1 &
pid=$!
for _ in $(seq 1 300); do
  grep -q "session running" "$tmp/out.log" 2>/dev/null && break
  kill -0 "$pid" 2>/dev/null || break
  sleep 0.1
done
if ! grep -q "session running" "$tmp/out.log"; then
  echo "bpf_memory: the $profile session did not start:" >&2
  cat "$tmp/out.log" >&2
  exit 1
fi

for f in /proc/"$pid"/fdinfo/*; do
  awk '/^map_type:/{t=$2} /^max_entries:/{e=$2} /^memlock:/{m=$2} /^map_id:/{i=$2}
       END{if (i != "") print i, t, e, m}' "$f" 2>/dev/null
done | sort -u -k1,1n >"$tmp/maps"
# Map names, while the maps live: bpftool when present (fdinfo has none), else the type.
if command -v bpftool >/dev/null; then
  bpftool -j map show 2>/dev/null | python3 -c '
import json, sys
for m in json.load(sys.stdin):
    print(m["id"], m.get("name", "?"))' >"$tmp/names" 2>/dev/null
else
  : >"$tmp/names"
fi
kill -INT "$pid" 2>/dev/null
wait "$pid" 2>/dev/null
awk 'NR==FNR{n[$1]=$2; next} {printf "%10.2f MiB  %-7s %-20s %s entries\n", $4/1048576, "id " $1, (n[$1] ? n[$1] : "type " $2), $3; s += $4}
     END{printf "%10.2f MiB  total locked by %d maps\n", s/1048576, NR}' \
  "$tmp/names" "$tmp/maps" | sort -rn | head -25
total=$(awk '{s += $4} END{printf "%.2f", s/1048576}' "$tmp/maps")
echo "bpf_memory_mib=$total profile=$profile kernel=$(uname -r)"
if [ -n "$limit" ] && awk -v t="$total" -v l="$limit" 'BEGIN{exit !(t > l)}'; then
  echo "bpf_memory: $total MiB is above $limit MiB" >&2
  exit 1
fi
