#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
#
# Java methods as loupe names them against Java Flight Recorder, on one run of a real Java
# program: javac compiling generated classes, under the unchanged `cpu` profile, with JFR
# recording the same JVM (settings=profile: an execution sample every 10 ms).
#
#   bench/cpusample/javac_vs_jfr.sh BUILD_DIR [CLASSES=150] [JDK_BIN=dir of java on PATH]
#
# Printed: javac's main-thread samples with Java frames and the share of them that name
# every Java frame; then the hottest leaf methods of JFR's samples with JFR's share and
# loupe's. Compared on the samples JFR can take: HotSpot's sampler (JfrGetCallTrace::
# find_top_frame) records a thread only while it runs Java code and drops a sample whose
# top frame is a stub (itable/vtable stubs, the megamorphic calls javac's visitors make),
# so loupe's side counts the samples whose innermost user frame is a Java method, each to
# that method. About half of JFR's attempts fail this way (JDK 17: 763 samples against
# loupe's 1,452 on the main thread), so its shares are of a smaller set.
# Exit 2 when a tool is missing (java, javac, jfr).
set -euo pipefail
build=$(cd "${1:?usage: javac_vs_jfr.sh BUILD_DIR [CLASSES] [JDK_BIN]}" && pwd)
classes=${2:-150}
jdk=${3:-$(dirname "$(readlink -f "$(command -v javac || echo /nonexistent)")")}
for t in javac jfr; do
  [[ -x $jdk/$t ]] || { echo "javac_vs_jfr: no $t in $jdk" >&2; exit 2; }
done
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

# Generated sources: generic classes with lambdas, streams and maps, heavy enough that javac
# attributes and infers types for seconds (its hottest code is its type visitors).
mkdir -p "$tmp/src" "$tmp/out"
for i in $(seq 1 "$classes"); do
  {
    echo "package gen; import java.util.*; import java.util.function.*; import java.util.stream.*;"
    echo "public class C$i<T extends Comparable<T>> {"
    for j in $(seq 1 40); do
      cat <<J
  private final Map<String, List<Integer>> m$j = new HashMap<>();
  public int f$j(int x) { int s = 0; for (int k = 0; k < x; k++) { s += (k * $i) ^ (s >>> 3); if (s % 7 == 0) s += g$j(k, v -> v + $j); } return s; }
  int g$j(int k, Function<Integer, Integer> fn) { List<Integer> l = m$j.computeIfAbsent("k" + k, q -> new ArrayList<>()); l.add(fn.apply(k)); return l.stream().map(v -> v * 2).filter(v -> v % 3 == 0).collect(Collectors.toList()).size(); }
  public <U extends Number> Optional<String> h$j(List<? extends U> xs, BiFunction<String, U, String> b) { String r = ""; for (U u : xs) r = b.apply(r, u); return Optional.of(r + C$(((i % classes) + 1)).class.getName()); }
J
    done
    echo "}"
  } >"$tmp/src/C$i.java"
done

start=$(date +%s.%N)
"$build/bin/loupe" run cpu -o "$tmp/loupe" -- "$jdk/javac" \
  "-J-XX:StartFlightRecording=filename=$tmp/r.jfr,settings=profile" -d "$tmp/out" \
  "$tmp"/src/*.java >"$tmp/loupe.log" 2>&1 || { tail -20 "$tmp/loupe.log"; exit 1; }
echo "javac on $classes classes under loupe and JFR: $(echo "$(date +%s.%N) - $start" | bc) s ($("$jdk/java" -version 2>&1 | head -1))"
"$jdk/jfr" print --json --events jdk.ExecutionSample "$tmp/r.jfr" >"$tmp/jfr.json"

python3 - "$tmp/loupe/records.jsonl" "$tmp/jfr.json" <<'PY'
import collections, json, sys

jfr = collections.Counter()
for e in json.load(open(sys.argv[2]))["recording"]["events"]:
    frames = e["values"]["stackTrace"]["frames"]
    if frames:
        m = frames[0]["method"]
        jfr[(m["type"]["name"] + "." + m["name"]).replace("/", ".")] += 1

loupe = collections.Counter()
with_java = every_named = 0
for line in open(sys.argv[1]):
    r = json.loads(line)
    if r.get("kind") != "stack" or not r.get("is_final") or r["labels"].get("comm") != "javac":
        continue
    n = r["stack"]["values"][0]["value"]
    user = [f for f in r["stack"]["frames"] if f["kind"] != "kernel"]
    java = [f for f in user if f["kind"] == "java"]
    if not java:
        continue
    with_java += n
    every_named += n if all(f.get("resolution") == "runtime" and f.get("symbol") for f in java) else 0
    if user[0]["kind"] == "java" and user[0].get("symbol") not in (None, "[jvm stub]"):
        loupe[user[0]["symbol"]] += n

jt, lt = sum(jfr.values()), sum(loupe.values())
if not jt or not lt:
    sys.exit(f"javac_vs_jfr: too few samples (JFR {jt}, loupe {lt})")
print(f"main thread: {with_java} samples with Java frames, {100 * every_named / with_java:.1f} % "
      f"name every Java frame")
print(f"hottest leaf methods: JFR's share of its {jt} samples, loupe's of its {lt}, difference")
worst = 0.0
for name, c in jfr.most_common(5):
    a, b = 100 * c / jt, 100 * loupe[name] / lt
    worst = max(worst, abs(a - b))
    print(f"  {a:5.1f} %  {b:5.1f} %  {b - a:+5.1f}  {name}")
print(f"largest difference of the five: {worst:.1f} points")
PY
