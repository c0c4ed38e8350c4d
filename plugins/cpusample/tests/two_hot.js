'use strict';
// Two hot functions, each with a loop of its own, called in turn for SECONDS (argv[2]).
// Every 250 ms one JSON line says the time each has taken so far by the program's own clock
// (and the wall clock, realtime ns), so a profile of any window can be held to it.
const secs = Number(process.argv[2] || 4);

function spinSines(n) {
  let s = 0;
  for (let i = 0; i < n; i++) s += Math.sin(i) * Math.cos(i);
  return s;
}

function hashLoop(n) {
  let h = 1;
  for (let i = 0; i < n; i++) h = (h * 31 + i) % 1000003;
  return h;
}

const now = () => process.hrtime.bigint();
const start = now();
const end = start + BigInt(Math.round(secs * 1e9));
let a = 0n, b = 0n, sink = 0, said = start;
const say = () => console.log(JSON.stringify({
  wall_ns: Date.now() * 1e6, a_s: Number(a) / 1e9, b_s: Number(b) / 1e9}));
for (let t = start; t < end;) {
  sink += spinSines(300000);
  const t1 = now();
  a += t1 - t;
  sink += hashLoop(1200000);
  t = now();
  b += t - t1;
  if (t - said >= 250000000n) {
    say();
    said = t;
  }
}
say();
if (!(sink > 0)) process.exitCode = 1;
