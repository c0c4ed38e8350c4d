// SPDX-License-Identifier: Apache-2.0
//
// A CPU-bound workload with known stacks for the cpusample tests and bench:
//   cpu_spin SECONDS [user|syscall|clock]
//   cpu_spin MILLIONS fixed      (a fixed amount of work; prints the elapsed seconds, for bench/)
// "user" burns CPU in main -> cpu_spin_outer -> cpu_spin_inner (frame pointers kept);
// "syscall" loops on getppid() so most samples land in the kernel under
// main -> cpu_syscall_loop; "clock" loops on clock_gettime(), so most samples land in
// the vdso under main -> cpu_clock_loop.
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

static double now_s(void) {
  struct timespec ts;

  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec + ts.tv_nsec / 1e9;
}

volatile uint64_t sink;

__attribute__((noinline)) void cpu_spin_inner(uint64_t n) {
  uint64_t x = sink;

  for (uint64_t i = 0; i < n; i++) x = x * 6364136223846793005ull + 1442695040888963407ull;
  sink = x;
}

__attribute__((noinline)) void cpu_spin_outer(double seconds) {
  double end = now_s() + seconds;

  while (now_s() < end) cpu_spin_inner(200000);
}

__attribute__((noinline)) void cpu_syscall_loop(double seconds) {
  double end = now_s() + seconds;

  while (now_s() < end)
    for (int i = 0; i < 1000; i++) syscall(SYS_getppid);
}

__attribute__((noinline)) void cpu_clock_loop(double seconds) {
  double end = now_s() + seconds;
  struct timespec ts;

  while (now_s() < end)
    for (int i = 0; i < 1000; i++) clock_gettime(CLOCK_MONOTONIC, &ts);
}

int main(int argc, char** argv) {
  double seconds = argc > 1 ? atof(argv[1]) : 1.0;
  const char* mode = argc > 2 ? argv[2] : "user";

  if (strcmp(mode, "fixed") == 0) {
    double t0 = now_s();

    for (long i = 0; i < (long)(seconds * 5); i++) cpu_spin_inner(200000);
    printf("elapsed %.4f\n", now_s() - t0);
    return 0;
  }
  if (strcmp(mode, "syscall") == 0)
    cpu_syscall_loop(seconds);
  else if (strcmp(mode, "clock") == 0)
    cpu_clock_loop(seconds);
  else
    cpu_spin_outer(seconds);
  printf("%llu\n", (unsigned long long)sink);
  return 0;
}
