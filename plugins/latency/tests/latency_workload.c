// SPDX-License-Identifier: Apache-2.0
//
// A workload with known latency behaviour for the latency profiler's tests. Built -O0,
// with symbols, every traced function noinline so uprobes see each call.
//
//   latency_workload N M R D K
//     N calls of lat_sleep_3ms()    (each ~3 ms: usleep -> clock_nanosleep)
//     M calls of lat_spin_2us()     (each ~2 us of busy CPU, no syscall)
//     R calls of lat_recurse(D)     (D nested levels of the same function)
//     K nanosleep(2) syscalls of ~5 ms (the raw syscall, not clock_nanosleep)
//   latency_workload N M R D K exit-inside
//     the same, then exits from inside lat_exit_inside(): an entry whose exit never comes
//
// With LATENCY_WORKLOAD_SELF=PATH it writes what it measured of itself there: the median of
// each timed call as its caller timed it ("spin2us_median_ns=N", "sleep3ms_...",
// "nanosleep_..."). The caller's window holds
// the probes' traps as well as the spin, so it bounds from above what a profiler can see
// on this kernel and machine, however slow the traps are (emulated ones are).
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

static unsigned long long now_ns(void) {
  struct timespec ts;

  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (unsigned long long)ts.tv_sec * 1000000000ull + ts.tv_nsec;
}

__attribute__((noinline)) void lat_sleep_3ms(void) {
  usleep(3000);
}

__attribute__((noinline)) void lat_spin_2us(void) {
  unsigned long long end = now_ns() + 2000;

  while (now_ns() < end)
    ;
}

__attribute__((noinline)) int lat_recurse(int depth) {
  volatile int x = depth;

  if (depth > 1) x += lat_recurse(depth - 1);
  return x;
}

__attribute__((noinline)) void lat_exit_inside(void) {
  exit(0);
}

static void nanosleep_5ms(void) {
  struct timespec ts = {.tv_sec = 0, .tv_nsec = 5000000};

  syscall(SYS_nanosleep, &ts, NULL);
}

static int cmp_ull(const void* a, const void* b) {
  unsigned long long x = *(const unsigned long long*)a, y = *(const unsigned long long*)b;

  return x < y ? -1 : x > y;
}

// Calls `fn` `count` times, timing each call from here, and writes the median as
// "<key>_median_ns=N" when LATENCY_WORKLOAD_SELF names a file.
static void timed(void (*fn)(void), long count, const char* key) {
  static FILE* self;
  static int opened;
  unsigned long long* ns;
  long i;

  if (count <= 0) return;
  ns = calloc((size_t)count, sizeof(*ns));
  if (!ns) exit(1);
  for (i = 0; i < count; i++) {
    unsigned long long t0 = now_ns();

    fn();
    ns[i] = now_ns() - t0;
  }
  if (!opened) {
    const char* path = getenv("LATENCY_WORKLOAD_SELF");

    opened = 1;
    self = path ? fopen(path, "w") : NULL;
  }
  if (self) {
    qsort(ns, (size_t)count, sizeof(*ns), cmp_ull);
    fprintf(self, "%s_median_ns=%llu\n", key, ns[count / 2]);
    fflush(self);
  }
  free(ns);
}

int main(int argc, char** argv) {
  long n, m, r, d, k, i;

  if (argc != 6 && argc != 7) {
    fprintf(stderr, "usage: %s N M R D K [exit-inside]\n", argv[0]);
    return 2;
  }
  n = atol(argv[1]);
  m = atol(argv[2]);
  r = atol(argv[3]);
  d = atol(argv[4]);
  k = atol(argv[5]);
  timed(lat_sleep_3ms, n, "sleep3ms");
  timed(lat_spin_2us, m, "spin2us");
  for (i = 0; i < r; i++) lat_recurse((int)d);
  timed(nanosleep_5ms, k, "nanosleep");
  if (argc == 7) lat_exit_inside();
  return 0;
}
