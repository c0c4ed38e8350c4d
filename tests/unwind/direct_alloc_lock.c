// SPDX-License-Identifier: Apache-2.0
/*
 * Allocations and lock calls made straight from the functions that matter, as real code
 * makes them: alloc_site() calls malloc, lock_site() calls pthread_mutex_lock and
 * release_site() pthread_mutex_unlock, with nothing in between (and no tail call: each
 * does something after the call). A frame-pointer walk through libc, which builds no frame,
 * loses these callers or their callers; an unwinder that follows libc's own CFI keeps them.
 * Built twice, with and without frame pointers (tests.cmake).
 *
 *   direct_alloc_lock [settle_ms]
 *     after settle_ms asleep in settle() (a profiler that loads per-process state once the
 *     process runs has it before the sites start):
 *     main thread:    alloc_phase -> alloc_site: 2000 x malloc(16 + (i % 61) * 8), kept
 *                     live until the end (stacks reach main)
 *     4 threads:      worker -> lock_site, 15 times each: pthread_mutex_lock(&g_lock), hold
 *                     it 2 ms asleep, release_site -> pthread_mutex_unlock (stacks reach
 *                     start_thread)
 *   and prints what it did, measured by itself (lock_wait_ns: the time its
 *   pthread_mutex_lock calls on g_lock took, summed over the threads):
 *     pid=N alloc_site_allocs=N alloc_site_bytes=N lock_addr=0x... lock_wait_ns=N
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

#define ALLOCS 2000
#define THREADS 4
#define ITERATIONS 15
#define HOLD_NS (2 * 1000000L)

pthread_mutex_t g_lock = PTHREAD_MUTEX_INITIALIZER;

static void* volatile keep[ALLOCS];
static uint64_t alloc_bytes;
static uint64_t lock_wait_ns;
static volatile unsigned long releases, phases;
static pthread_mutex_t stats = PTHREAD_MUTEX_INITIALIZER;
static pthread_barrier_t start;

static uint64_t now_ns(void) {
  struct timespec ts;

  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static void sleep_ns(long ns) {
  struct timespec ts = {ns / 1000000000L, ns % 1000000000L};

  while (nanosleep(&ts, &ts) != 0) {
  }
}

__attribute__((noinline)) void alloc_site(void) {
  for (int i = 0; i < ALLOCS; i++) {
    size_t n = 16 + (size_t)(i % 61) * 8;

    keep[i] = malloc(n);
    alloc_bytes += n;
  }
}

__attribute__((noinline)) void alloc_phase(void) {
  alloc_site();
  phases++; /* not a tail call: alloc_phase stays on the stack */
}

__attribute__((noinline)) void release_site(void) {
  pthread_mutex_unlock(&g_lock);
  releases++;
}

/* The lock's wait, as the workload sees it. */
__attribute__((noinline)) uint64_t lock_site(void) {
  uint64_t t0 = now_ns(), waited;

  pthread_mutex_lock(&g_lock);
  waited = now_ns() - t0;
  sleep_ns(HOLD_NS);
  release_site();
  return waited;
}

static void* worker(void* arg) {
  uint64_t mine = 0;

  (void)arg;
  pthread_barrier_wait(&start);
  for (int i = 0; i < ITERATIONS; i++) mine += lock_site();
  pthread_mutex_lock(&stats);
  lock_wait_ns += mine;
  pthread_mutex_unlock(&stats);
  return NULL;
}

__attribute__((noinline)) void settle(long ms) {
  sleep_ns(ms * 1000000L);
}

int main(int argc, char** argv) {
  pthread_t tids[THREADS];

  if (argc >= 2) settle(atol(argv[1]));
  alloc_phase();
  pthread_barrier_init(&start, NULL, THREADS);
  for (int i = 0; i < THREADS; i++) pthread_create(&tids[i], NULL, worker, NULL);
  for (int i = 0; i < THREADS; i++) pthread_join(tids[i], NULL);
  printf("pid=%d alloc_site_allocs=%d alloc_site_bytes=%llu lock_addr=%p lock_wait_ns=%llu\n",
         (int)getpid(), ALLOCS, (unsigned long long)alloc_bytes, (void*)&g_lock,
         (unsigned long long)lock_wait_ns);
  fflush(stdout);
  for (int i = 0; i < ALLOCS; i++) free(keep[i]);
  return 0;
}
