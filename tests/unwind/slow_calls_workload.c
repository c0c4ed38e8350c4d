// SPDX-License-Identifier: Apache-2.0
/*
 * Slow libc calls made straight from the function that matters, each timed by the workload
 * itself: what latency's outliers and fileio's slow events must name. Built without frame
 * pointers (tests/unwind/CMakeLists.txt): a frame-pointer walk from inside libc's frameless
 * wrapper skips exactly the site; the in-kernel unwinder keeps it.
 *
 *   slow_calls_workload [settle MS]
 *     slow_sleep_site (main thread):  20 x nanosleep(20 ms)
 *     slow_read_site  (a thread):     20 x read(pipe A, 1 byte), each waiting for pacer_site
 *     slow_write_site (a thread):     21 x write(pipe B, 4 KiB) into a one-page pipe, each
 *                                     after the first waiting for pacer_site to drain it
 *     pacer_site      (a thread):     20 x { nanosleep(20 ms); write(A, 1); read(B, 4 KiB) }
 *   then prints how many calls of each site and function took 5 ms or more by the workload's
 *   own clock (the sleeps and waits take ~20 ms, every other call microseconds):
 *     pid=N settle.nanosleep=N slow_sleep_site.nanosleep=N slow_read_site.read=N ...
 *   settle MS: first MS milliseconds asleep in settle() (one more slow call), so a profiler
 *   that loads per-process state once the process runs has it before the sites start.
 */
#define _GNU_SOURCE
#include <fcntl.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

#define ROUNDS 20
#define PAUSE_NS (20 * 1000000L)
#define SLOW_NS (5 * 1000000ULL)
#define CHUNK 4096

static int pipe_a[2], pipe_b[2];

/* Slow calls per site and function (each counter written by one thread, read after join). */
static int settle_nanosleep, sleep_nanosleep, read_read, write_write;
static int pacer_nanosleep, pacer_write, pacer_read;

static uint64_t now_ns(void) {
  struct timespec ts;

  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* Counts the call that began at `start` if it was slow. */
static void tally(int* counter, uint64_t start) {
  if (now_ns() - start >= SLOW_NS) (*counter)++;
}

__attribute__((noinline)) void settle(long ms) {
  struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
  uint64_t t = now_ns();

  if (nanosleep(&ts, NULL) != 0) exit(3);
  tally(&settle_nanosleep, t);
}

__attribute__((noinline)) void slow_sleep_site(void) {
  for (int i = 0; i < ROUNDS; i++) {
    struct timespec ts = {0, PAUSE_NS};
    uint64_t t = now_ns();

    if (nanosleep(&ts, NULL) != 0) exit(3);
    tally(&sleep_nanosleep, t);
  }
}

__attribute__((noinline)) void slow_read_site(void) {
  char c;

  for (int i = 0; i < ROUNDS; i++) {
    uint64_t t = now_ns();

    if (read(pipe_a[0], &c, 1) != 1) exit(3);
    tally(&read_read, t);
  }
}

__attribute__((noinline)) void slow_write_site(void) {
  static char chunk[CHUNK];

  for (int i = 0; i < ROUNDS + 1; i++) {
    uint64_t t = now_ns();

    if (write(pipe_b[1], chunk, CHUNK) != CHUNK) exit(3);
    tally(&write_write, t);
  }
}

__attribute__((noinline)) void pacer_site(void) {
  static char sink[CHUNK];

  for (int i = 0; i < ROUNDS; i++) {
    struct timespec ts = {0, PAUSE_NS};
    uint64_t t = now_ns();

    if (nanosleep(&ts, NULL) != 0) exit(3);
    tally(&pacer_nanosleep, t);
    t = now_ns();
    if (write(pipe_a[1], "x", 1) != 1) exit(3);
    tally(&pacer_write, t);
    t = now_ns();
    if (read(pipe_b[0], sink, CHUNK) != CHUNK) exit(3);
    tally(&pacer_read, t);
  }
}

static void* reader(void* arg) {
  (void)arg;
  slow_read_site();
  return NULL;
}

static void* writer(void* arg) {
  (void)arg;
  slow_write_site();
  return NULL;
}

static void* pacer(void* arg) {
  (void)arg;
  pacer_site();
  return NULL;
}

int main(int argc, char** argv) {
  pthread_t r, w, p;

  if (argc >= 3 && argv[1][0] == 's') settle(atol(argv[2]));
  if (pipe(pipe_a) != 0 || pipe(pipe_b) != 0) return 2;
  /* One page: every write after the first waits for the pacer to drain the one before. */
  if (fcntl(pipe_b[1], F_SETPIPE_SZ, CHUNK) != CHUNK) return 2;
  pthread_create(&r, NULL, reader, NULL);
  pthread_create(&w, NULL, writer, NULL);
  pthread_create(&p, NULL, pacer, NULL);
  slow_sleep_site();
  pthread_join(r, NULL);
  pthread_join(w, NULL);
  pthread_join(p, NULL);
  printf("pid=%d settle.nanosleep=%d slow_sleep_site.nanosleep=%d slow_read_site.read=%d "
         "slow_write_site.write=%d pacer_site.nanosleep=%d pacer_site.write=%d "
         "pacer_site.read=%d\n",
         (int)getpid(), settle_nanosleep, sleep_nanosleep, read_read, write_write,
         pacer_nanosleep, pacer_write, pacer_read);
  fflush(stdout);
  return 0;
}
