// SPDX-License-Identifier: Apache-2.0
//
// N threads contend on one global pthread mutex g_lock, each holding it ~HOLD_US for K
// iterations, and measure their own wait (the time pthread_mutex_lock takes). Prints the
// lock's address, the total wait and the threads' lifetimes added up (from the start
// barrier to their last unlock) so a test can compare loupe's figures with them:
//   lock_addr=0x... total_wait_ns=... contended=... threads=N iterations=K threads_ns=...
//   blocked_ns=...
// blocked_ns: of each wait, the time the thread was neither on a CPU nor waiting for one
// (wall minus its CPU time minus its run-queue delay, /proc/thread-self/schedstat): the time
// it slept, which only a futex wait does in pthread_mutex_lock. Unlike the wall time it
// holds no uprobe trap (CPU) and no preemption by other load (run-queue delay).
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
static uint64_t g_blocked_ns;
static pthread_mutex_t g_stats = PTHREAD_MUTEX_INITIALIZER;
static pthread_barrier_t g_start;

static uint64_t now_ns(void) {
  struct timespec ts;

  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static uint64_t thread_cpu_ns(void) {
  struct timespec ts;

  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* The thread's time on a run queue waiting for a CPU so far (0 without schedstat). */
static uint64_t run_delay_ns(void) {
  unsigned long long cpu = 0, delay = 0;
  FILE* f = fopen("/proc/thread-self/schedstat", "r");

  if (f) {
    if (fscanf(f, "%llu %llu", &cpu, &delay) != 2) delay = 0;
    fclose(f);
  }
  return delay;
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

/* The function a profile must name as the waiter, and as the releaser. The CPU and delay
 * windows enclose the wall one, so what is taken off is never too little. */
uint64_t __attribute__((noinline)) contend_on_g_lock(uint64_t* blocked) {
  uint64_t d0 = run_delay_ns(), c0 = thread_cpu_ns(), t0 = now_ns(), waited, off;

  pthread_mutex_lock(&g_lock);
  waited = now_ns() - t0;
  off = (thread_cpu_ns() - c0) + (run_delay_ns() - d0);
  *blocked += waited > off ? waited - off : 0;
  hold_lock(g_hold_us);
  release_g_lock();
  return waited;
}

static void* worker(void* arg) {
  uint64_t mine = 0, contended = 0, blocked = 0, start;

  (void)arg;
  pthread_barrier_wait(&g_start);
  start = now_ns();
  for (int i = 0; i < g_iterations; i++) {
    uint64_t w = contend_on_g_lock(&blocked);

    mine += w;
    contended += w > 50000; /* > 50 us: it slept on the futex */
  }
  start = now_ns() - start;
  pthread_mutex_lock(&g_stats);
  g_threads_ns += start;
  g_total_wait_ns += mine;
  g_blocked_ns += blocked;
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
      "lock_addr=%p total_wait_ns=%llu contended=%llu threads=%d iterations=%d threads_ns=%llu "
      "blocked_ns=%llu\n",
      (void*)&g_lock, (unsigned long long)g_total_wait_ns, (unsigned long long)g_contended, n,
      g_iterations, (unsigned long long)g_threads_ns, (unsigned long long)g_blocked_ns);
  return 0;
}
