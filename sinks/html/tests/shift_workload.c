// SPDX-License-Identifier: Apache-2.0
/*
 * A workload whose CPU time moves between two functions, for differential reports:
 *   shift_workload A_MS B_MS   spins A_MS ms of its own CPU time in spin_a, then B_MS in
 *                              spin_b; prints a_ns=N b_ns=N
 * Two runs with the numbers swapped shift the profile from one function to the other.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

static uint64_t cpu_ns(void) {
  struct timespec ts;

  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

__attribute__((noinline)) static uint64_t burn(long ms) {
  volatile uint64_t x = 0;
  uint64_t t0 = cpu_ns(), used;

  do {
    for (int i = 0; i < 100000; i++) x += (uint64_t)i;
    used = cpu_ns() - t0;
  } while (used < (uint64_t)ms * 1000000ull);
  return used;
}

/* Distinct bodies, so the linker cannot fold them into one function. */
__attribute__((noinline)) static uint64_t spin_a(long ms) {
  return burn(ms) + 1;
}

__attribute__((noinline)) static uint64_t spin_b(long ms) {
  return burn(ms) + 2;
}

int main(int argc, char** argv) {
  if (argc != 3) {
    fprintf(stderr, "usage: %s A_MS B_MS\n", argv[0]);
    return 2;
  }
  uint64_t a = spin_a(atol(argv[1]));
  uint64_t b = spin_b(atol(argv[2]));

  printf("a_ns=%llu b_ns=%llu\n", (unsigned long long)a, (unsigned long long)b);
  return 0;
}
