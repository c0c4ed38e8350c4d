// SPDX-License-Identifier: Apache-2.0
/*
 * USDT probes with known ground truth for the latency plugin's usdt targets.
 *
 *   usdt_workload N T [P]
 *
 * N requests: loupe:req__start(kind) at one of two sites (kind 0 from serve_even, kind 1
 * from serve_odd: one probe name, two sites), 1 ms of sleep for kind 0 and 3 ms for kind 1,
 * then loupe:req__done(kind). Then T ticks of loupe:tick(i % 4), each behind its
 * semaphore, as runtimes guard probes whose arguments cost something: the tick only fires
 * while a tracer has set the semaphore. Prints "enabled E" (ticks that saw it set).
 * With P (bench/latency/usdt_overhead.sh): then P back-to-back req__start/req__done pairs,
 * timed by the workload itself: prints "ns_per_pair X".
 */
#define _SDT_HAS_SEMAPHORES 1
#include <stdio.h>
#include <stdlib.h>
#include <sys/sdt.h>
#include <time.h>

/* With _SDT_HAS_SEMAPHORES every probe has one; only tick's is looked at. */
#define LOUPE_SEMAPHORE(name) \
  __extension__ unsigned short loupe_##name##_semaphore __attribute__((section(".probes")))
LOUPE_SEMAPHORE(tick);
LOUPE_SEMAPHORE(req__start);
LOUPE_SEMAPHORE(req__done);

static void sleep_ms(int ms) {
  struct timespec ts = {0, ms * 1000000L};
  nanosleep(&ts, NULL);
}

__attribute__((noinline)) static void serve_even(void) {
  int kind = 0;
  STAP_PROBE1(loupe, req__start, kind);
  sleep_ms(1);
  STAP_PROBE1(loupe, req__done, kind);
}

__attribute__((noinline)) static void serve_odd(void) {
  int kind = 1;
  STAP_PROBE1(loupe, req__start, kind);
  sleep_ms(3);
  STAP_PROBE1(loupe, req__done, kind);
}

int main(int argc, char** argv) {
  if (argc != 3 && argc != 4) {
    fprintf(stderr, "usage: %s N T [P]\n", argv[0]);
    return 2;
  }
  int n = atoi(argv[1]), t = atoi(argv[2]), enabled = 0;
  for (int i = 0; i < n; ++i) (i % 2 ? serve_odd : serve_even)();
  for (int i = 0; i < t; ++i) {
    if (loupe_tick_semaphore) {
      ++enabled;
      int v = i % 4;
      STAP_PROBE1(loupe, tick, v);
    }
  }
  printf("enabled %d\n", enabled);
  if (argc == 4) {
    long p = atol(argv[3]);
    struct timespec a, b;
    clock_gettime(CLOCK_MONOTONIC, &a);
    for (long i = 0; i < p; ++i) {
      int kind = (int)(i & 1);
      STAP_PROBE1(loupe, req__start, kind);
      STAP_PROBE1(loupe, req__done, kind);
    }
    clock_gettime(CLOCK_MONOTONIC, &b);
    double ns = (b.tv_sec - a.tv_sec) * 1e9 + (b.tv_nsec - a.tv_nsec);
    printf("ns_per_pair %.1f\n", p ? ns / p : 0.0);
  }
  return 0;
}
