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
// lat_spin_2us() as its caller timed it ("spin2us_median_ns=N"). The caller's window holds
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

static void report_self(long m, unsigned long long* spin_ns) {
  const char* path = getenv("LATENCY_WORKLOAD_SELF");
  FILE* f;

  if (!path || m <= 0) return;
  qsort(spin_ns, (size_t)m, sizeof(*spin_ns), cmp_ull);
  f = fopen(path, "w");
  if (!f) return;
  fprintf(f, "spin2us_median_ns=%llu\n", spin_ns[m / 2]);
  fclose(f);
}

int main(int argc, char** argv) {
  unsigned long long* spin_ns;
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
  for (i = 0; i < n; i++) lat_sleep_3ms();
  spin_ns = calloc(m > 0 ? (size_t)m : 1, sizeof(*spin_ns));
  if (!spin_ns) return 1;
  for (i = 0; i < m; i++) {
    unsigned long long t0 = now_ns();

    lat_spin_2us();
    spin_ns[i] = now_ns() - t0;
  }
  report_self(m, spin_ns);
  free(spin_ns);
  for (i = 0; i < r; i++) lat_recurse((int)d);
  for (i = 0; i < k; i++) nanosleep_5ms();
  if (argc == 7) lat_exit_inside();
  return 0;
}
