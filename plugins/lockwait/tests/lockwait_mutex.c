// SPDX-License-Identifier: Apache-2.0
//
// N threads contend on one global pthread mutex g_lock, each holding it ~HOLD_US for K
// iterations, and measure their own wait (the time pthread_mutex_lock takes). Prints the
// lock's address, the total wait and the threads' lifetimes added up (from the start
// barrier to their last unlock) so a test can compare loupe's figures with them:
//   lock_addr=0x... total_wait_ns=... contended=... threads=N iterations=K threads_ns=...
// Usage: lockwait_mutex [threads=4] [iterations=20] [hold_us=2000]
// Built with frame pointers and symbols: the waiting stack must name the callers.
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

pthread_mutex_t g_lock = PTHREAD_MUTEX_INITIALIZER;

static int g_iterations = 20;
static long g_hold_us = 2000;
static uint64_t g_total_wait_ns;
static uint64_t g_contended;
static uint64_t g_threads_ns;
static pthread_mutex_t g_stats = PTHREAD_MUTEX_INITIALIZER;
static pthread_barrier_t g_start;

static uint64_t now_ns(void) {
  struct timespec ts;

  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* Sleeping, not spinning, while holding: on a loaded 2-CPU machine a spinning holder gets
 * preempted and the waits balloon. nanosleep is no futex, so it is not a lock wait. */
static void __attribute__((noinline)) hold_lock(long us) {
  struct timespec ts = {.tv_sec = us / 1000000, .tv_nsec = (us % 1000000) * 1000};

  nanosleep(&ts, NULL);
}

/* The unlock in a function of its own: frame-pointer unwinding from libc's futex wake
 * skips the direct caller of pthread_mutex_unlock (libc keeps no frame pointer), so this
 * is the frame skipped and contend_on_g_lock, the releaser, stays on the stack. */
static void __attribute__((noinline)) release_g_lock(void) {
  pthread_mutex_unlock(&g_lock);
}

/* The function a profile must name as the waiter, and as the releaser. */
uint64_t __attribute__((noinline)) contend_on_g_lock(void) {
  uint64_t t0 = now_ns(), waited;

  pthread_mutex_lock(&g_lock);
  waited = now_ns() - t0;
  hold_lock(g_hold_us);
  release_g_lock();
  return waited;
}

static void* worker(void* arg) {
  uint64_t mine = 0, contended = 0, start;

  (void)arg;
  pthread_barrier_wait(&g_start);
  start = now_ns();
  for (int i = 0; i < g_iterations; i++) {
    uint64_t w = contend_on_g_lock();

    mine += w;
    contended += w > 50000; /* > 50 us: it slept on the futex */
  }
  start = now_ns() - start;
  pthread_mutex_lock(&g_stats);
  g_threads_ns += start;
  g_total_wait_ns += mine;
  g_contended += contended;
  pthread_mutex_unlock(&g_stats);
  return NULL;
}

int main(int argc, char** argv) {
  int n = argc > 1 ? atoi(argv[1]) : 4;
  pthread_t tids[64];

  if (argc > 2) g_iterations = atoi(argv[2]);
  if (argc > 3) g_hold_us = atol(argv[3]);
  if (n < 1 || n > 64) n = 4;
  pthread_barrier_init(&g_start, NULL, (unsigned)n);
  for (int i = 0; i < n; i++) pthread_create(&tids[i], NULL, worker, NULL);
  for (int i = 0; i < n; i++) pthread_join(tids[i], NULL);
  printf(
      "lock_addr=%p total_wait_ns=%llu contended=%llu threads=%d iterations=%d threads_ns=%llu\n",
      (void*)&g_lock, (unsigned long long)g_total_wait_ns, (unsigned long long)g_contended, n,
      g_iterations, (unsigned long long)g_threads_ns);
  return 0;
}
