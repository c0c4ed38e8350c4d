// SPDX-License-Identifier: Apache-2.0
//
// A minimal JIT for the jitregions tests: writes x86-64 machine code (a count-down loop)
// into an anonymous RW mapping, flips it to RX with mprotect, names it `jit_hot_loop` in
// /tmp/perf-PID.map as V8 or a JVM agent would, and runs it for SECONDS (default 2).
// Prints "region START SIZE TID" so the test can compare with what loupe reports.
//   jit_hot_loop [SECONDS] [--churn N]   (--churn: also install and unmap N extra regions)
#define _GNU_SOURCE
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

typedef uint64_t (*loop_fn)(uint64_t);

/* mov rax, rdi; 1: dec rax; jnz 1b; ret */
static const unsigned char kLoop[] = {0x48, 0x89, 0xf8, 0x48, 0xff, 0xc8, 0x75, 0xfb, 0xc3};

static double now_s(void) {
  struct timespec ts;

  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec + ts.tv_nsec / 1e9;
}

static void* install(size_t size) {
  void* p = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);

  if (p == MAP_FAILED) {
    perror("mmap");
    exit(1);
  }
  memcpy(p, kLoop, sizeof(kLoop));
  if (mprotect(p, size, PROT_READ | PROT_EXEC) != 0) {
    perror("mprotect");
    exit(1);
  }
  return p;
}

int main(int argc, char** argv) {
  double seconds = argc > 1 ? atof(argv[1]) : 2.0;
  int churn = argc > 3 && strcmp(argv[2], "--churn") == 0 ? atoi(argv[3]) : 0;
  const size_t size = 4096;
  char path[64];
  FILE* map;

  for (int i = 0; i < churn; i++) {
    void* p = install(size);

    munmap(p, size);
  }
  void* code = install(size);

  snprintf(path, sizeof(path), "/tmp/perf-%d.map", getpid());
  map = fopen(path, "w");
  if (!map) {
    perror(path);
    return 1;
  }
  fprintf(map, "%lx %zx jit_hot_loop\n", (unsigned long)(uintptr_t)code, sizeof(kLoop));
  fclose(map);
  printf("region %#lx %zu %ld\n", (unsigned long)(uintptr_t)code, size, (long)syscall(SYS_gettid));
  fflush(stdout);

  loop_fn fn = (loop_fn)code;
  double end = now_s() + seconds;
  uint64_t calls = 0;

  while (now_s() < end) {
    fn(20 * 1000 * 1000);
    calls++;
  }
  fprintf(stderr, "jit_hot_loop: %llu calls\n", (unsigned long long)calls);
  return 0;
}
