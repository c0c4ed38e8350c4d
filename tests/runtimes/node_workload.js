'use strict';
// The Node.js program of the V8 frames' tests (tests/runtimes): a mode per profiler, each
// saying what it did by its own clock as one JSON line at the end.
//   sleep SECONDS  waitForTheDatabase() blocks 20 ms at a time (Atomics.wait: a futex)
//   alloc SECONDS  allocateBuffers() makes 8 buffers of 1 MiB outside V8's heap, every 50 ms
const mode = process.argv[2];
const said = {};

function waitForTheDatabase(cell) {
  Atomics.wait(cell, 0, 0, 20);
}

function allocateBuffers(n, size) {
  const keep = [];
  for (let i = 0; i < n; i++) keep.push(Buffer.allocUnsafeSlow(size));
  return keep;
}

if (mode === 'sleep') {
  const cell = new Int32Array(new SharedArrayBuffer(4));
  const end = Date.now() + Number(process.argv[3] || 2) * 1000;
  let waited = 0n;
  while (Date.now() < end) {
    const t = process.hrtime.bigint();
    waitForTheDatabase(cell);
    waited += process.hrtime.bigint() - t;
  }
  said.waited_s = Number(waited) / 1e9;
} else if (mode === 'alloc') {
  // In rounds over seconds, not at once at start: a process is read (its V8 found) within
  // the session's first tables of it, which under emulation come after node's start-up.
  const end = Date.now() + Number(process.argv[3] || 2) * 1000;
  said.buffers = 0;
  let kept = [];
  const round = () => {
    kept = allocateBuffers(8, 1 << 20);
    said.buffers += kept.length;
    said.bytes_each = kept[0].length;
    if (Date.now() < end) setTimeout(round, 50);
    else console.log(JSON.stringify(said));
  };
  round();
}
if (mode !== 'alloc') console.log(JSON.stringify(said));
