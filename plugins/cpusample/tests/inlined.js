'use strict';
// Two small leaves TurboFan inlines into their callers; the callers are called thousands
// of times, so their optimized code is their own (not on-stack replacement).
const secs = Number(process.argv[2] || 4);
function leafSin(i) { return Math.sin(i) * Math.cos(i); }
function leafHash(h, i) { return (h * 31 + i) % 1000003; }
function outerA(n) { let s = 0; for (let i = 0; i < n; i++) s += leafSin(i); return s; }
function outerB(n) { let h = 1; for (let i = 0; i < n; i++) h = leafHash(h, i); return h; }
const end = Date.now() + secs * 1000;
let sink = 0;
while (Date.now() < end) { sink += outerA(20000); sink += outerB(60000); }
if (!(sink > 0)) process.exitCode = 1;
