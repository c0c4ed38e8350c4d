// SPDX-License-Identifier: Apache-2.0
//
// Two hot methods with about a 2:1 share of the main thread's CPU: heavy() runs twice the
// iterations of light(), with the same loop body. Each call runs long enough that the
// caller's loop stays cold, so neither is inlined into a compiled main().
//
// The split is the JIT's to make (C1 and C2 code of each side run at different times), so
// the program times its own CPU per method and prints it, every 200 ms and at the end, as
// {"wall_ns": ..., "heavy_s": ..., "light_s": ...} (wall_ns: the realtime clock, as a
// record's window): the figure a test compares its samples with, over the whole run or over
// a session's window of it.
// Usage: java TwoHot SECONDS
import java.lang.management.ManagementFactory;
import java.time.Instant;
import java.util.Locale;
import java.lang.management.ThreadMXBean;

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

  static void say(long heavyNs, long lightNs) {
    final Instant now = Instant.now();
    System.out.printf(
        Locale.ROOT,
        "{\"wall_ns\": %d, \"heavy_s\": %.6f, \"light_s\": %.6f}%n",
        now.getEpochSecond() * 1_000_000_000L + now.getNano(), heavyNs / 1e9, lightNs / 1e9);
    System.out.flush();
  }

  public static void main(String[] args) {
    final ThreadMXBean cpu = ManagementFactory.getThreadMXBean();
    long now = System.nanoTime();
    final long end = now + (long) (Double.parseDouble(args[0]) * 1e9);
    long nextSay = now + 200_000_000L;
    long heavyNs = 0, lightNs = 0;
    while (now < end) {
      long t0 = cpu.getCurrentThreadCpuTime();
      sink += heavy(2_000_000);
      long t1 = cpu.getCurrentThreadCpuTime();
      sink += light(1_000_000);
      long t2 = cpu.getCurrentThreadCpuTime();
      heavyNs += t1 - t0;
      lightNs += t2 - t1;
      now = System.nanoTime();
      if (now >= nextSay) {
        say(heavyNs, lightNs);
        nextSay = now + 200_000_000L;
      }
    }
    say(heavyNs, lightNs);
  }
}
