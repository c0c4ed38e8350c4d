// SPDX-License-Identifier: Apache-2.0
//
// A method the JIT inlines: mix() is small (under C2's MaxInlineSize) and called from one
// hot loop, so C2 compiles it into outer() and no frame of its own exists on the stack.
// Its time is still its own in HotSpot's view (Java Flight Recorder samples name it from
// outer()'s debug info), and a profiler that reads the VM's structures should say the same.
// Usage: java Inlined SECONDS
public final class Inlined {
  static volatile long sink;

  static long mix(long x, long i) {
    for (long k = 0; k < 64; k++) x = x * 6364136223846793005L + i + k;
    return x;
  }

  static long outer(long n) {
    long x = 1;
    for (long i = 0; i < n; i++) x = mix(x, i) ^ (x >>> 7);
    return x;
  }

  public static void main(String[] args) {
    final long end = System.nanoTime() + (long) (Double.parseDouble(args[0]) * 1e9);
    while (System.nanoTime() < end) sink += outer(100_000);
  }
}
