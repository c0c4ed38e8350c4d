// SPDX-License-Identifier: Apache-2.0
//
// Contends kernel locks from user space: N threads of one process map, touch and unmap
// memory in a loop, so they queue on the process's mmap_lock (an rwsem: page faults
// take it for read, mmap/munmap for write). Usage: lockwait_kernel [threads=4] [ms=500]
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <time.h>

static long g_ms = 500;
static volatile unsigned long g_rounds;

static uint64_t now_ms(void) {
  struct timespec ts;

  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

static void* churn(void* arg) {
  uint64_t end = now_ms() + (uint64_t)g_ms;
  size_t len = 64 * 4096;
  unsigned long rounds = 0;

  (void)arg;
  while (now_ms() < end) {
    char* p = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);

    if (p == MAP_FAILED) break;
    for (size_t off = 0; off < len; off += 4096) p[off] = 1;
    munmap(p, len);
    rounds++;
  }
  __sync_fetch_and_add(&g_rounds, rounds);
  return NULL;
}

int main(int argc, char** argv) {
  int n = argc > 1 ? atoi(argv[1]) : 4;
  pthread_t tids[64];

  if (argc > 2) g_ms = atol(argv[2]);
  if (n < 1 || n > 64) n = 4;
  for (int i = 0; i < n; i++) pthread_create(&tids[i], NULL, churn, NULL);
  for (int i = 0; i < n; i++) pthread_join(tids[i], NULL);
  printf("rounds=%lu threads=%d\n", g_rounds, n);
  return 0;
}
