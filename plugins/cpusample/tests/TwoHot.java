// SPDX-License-Identifier: Apache-2.0
//
// Two hot methods with a 2:1 share of the main thread's CPU: heavy() runs twice the
// iterations of light(), with the same loop body. Each call runs long enough that the
// caller's loop stays cold, so neither is inlined into a compiled main().
// Usage: java TwoHot SECONDS
public final class TwoHot {
  static volatile long sink;

  static long heavy(long n) {
    long x = 1;
    for (long i = 0; i < n; i++) x = x * 6364136223846793005L + i;
    return x;
  }

  static long light(long n) {
    long x = 7;
    for (long i = 0; i < n; i++) x = x * 2862933555777941757L + i;
    return x;
  }

  public static void main(String[] args) {
    long end = System.nanoTime() + (long) (Double.parseDouble(args[0]) * 1e9);
    while (System.nanoTime() < end) {
      sink += heavy(2_000_000);
      sink += light(1_000_000);
    }
  }
}
