// SPDX-License-Identifier: Apache-2.0
/*
 * Blocking calls made straight from the function that matters, as real code makes them:
 * sleep_site() calls nanosleep and read_site() calls read, with nothing in between. A
 * frame-pointer walk that starts in libc's wrapper (which builds no frame) skips exactly
 * that caller; an unwinder that follows the wrapper's own CFI keeps it. Built twice, with
 * and without frame pointers (tests.cmake).
 *
 *   direct_workload
 *     main thread:   sleep_site: 100 x nanosleep(10 ms)           (stacks reach main)
 *     reader thread: read_site: 50 reads of a pipe that writer_site on a third thread
 *                    writes every 20 ms                            (stacks reach clone3)
 *   and prints the time each site spent off the CPU, measured by the workload itself as
 *   the site's wall time minus its thread's CPU time in it:
 *     pid=N sleep_off_ns=N read_off_ns=N
 *   direct_workload settle MS: the same after MS milliseconds asleep in settle() (a profiler
 *   that loads per-process state once the process runs has it before the sites start).
 *   direct_workload gated: the same, but it first waits for a byte on stdin (so a test can
 *   load what it needs for the pid), and for another before it exits (so its addresses can
 *   still be symbolized).
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

static uint64_t clock_ns(clockid_t id) {
  struct timespec ts;

  clock_gettime(id, &ts);
  return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static int pipe_fds[2];
static uint64_t read_off_ns;
static long read_blocks; /* reads that switched out: a busy machine may delay the reader past
                          * the write, and then the read does not block */

static long voluntary_switches(void) {
  struct rusage ru;

  getrusage(RUSAGE_THREAD, &ru);
  return ru.ru_nvcsw;
}

__attribute__((noinline)) uint64_t sleep_site(void) {
  uint64_t wall = clock_ns(CLOCK_MONOTONIC), cpu = clock_ns(CLOCK_THREAD_CPUTIME_ID);

  for (int i = 0; i < 100; i++) {
    struct timespec ts = {0, 10 * 1000000L};

    while (nanosleep(&ts, &ts) != 0) {
    }
  }
  return (clock_ns(CLOCK_MONOTONIC) - wall) - (clock_ns(CLOCK_THREAD_CPUTIME_ID) - cpu);
}

__attribute__((noinline)) uint64_t read_site(void) {
  uint64_t wall = clock_ns(CLOCK_MONOTONIC), cpu = clock_ns(CLOCK_THREAD_CPUTIME_ID);
  char c;

  for (int i = 0; i < 50; i++) {
    long before = voluntary_switches();

    if (read(pipe_fds[0], &c, 1) != 1) exit(3);
    read_blocks += voluntary_switches() > before;
  }
  return (clock_ns(CLOCK_MONOTONIC) - wall) - (clock_ns(CLOCK_THREAD_CPUTIME_ID) - cpu);
}

__attribute__((noinline)) void writer_site(void) {
  for (int i = 0; i < 50; i++) {
    struct timespec ts = {0, 20 * 1000000L};

    while (nanosleep(&ts, &ts) != 0) {
    }
    if (write(pipe_fds[1], "x", 1) != 1) exit(3);
  }
}

static void* reader(void* arg) {
  (void)arg;
  read_off_ns = read_site();
  return NULL;
}

static void* writer(void* arg) {
  (void)arg;
  writer_site();
  return NULL;
}

__attribute__((noinline)) void settle(long ms) {
  struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};

  while (nanosleep(&ts, &ts) != 0) {
  }
}

static void wait_for_stdin(int gated) {
  char c;

  if (gated && read(0, &c, 1) != 1) exit(4);
}

int main(int argc, char** argv) {
  const int gated = argc >= 2 && argv[1][0] == 'g';
  pthread_t r, w;
  uint64_t sleep_off_ns;

  if (gated) {
    printf("pid=%d\n", (int)getpid());
    fflush(stdout);
  }
  wait_for_stdin(gated);
  if (argc >= 3 && argv[1][0] == 's') settle(atol(argv[2]));
  if (pipe(pipe_fds) != 0) return 2;
  pthread_create(&r, NULL, reader, NULL);
  pthread_create(&w, NULL, writer, NULL);
  sleep_off_ns = sleep_site();
  pthread_join(r, NULL);
  pthread_join(w, NULL);
  printf("pid=%d sleep_off_ns=%llu read_off_ns=%llu read_blocks=%ld\n", (int)getpid(),
         (unsigned long long)sleep_off_ns, (unsigned long long)read_off_ns, read_blocks);
  fflush(stdout);
  wait_for_stdin(gated);
  return 0;
}
