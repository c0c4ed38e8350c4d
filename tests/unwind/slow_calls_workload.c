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
 *   own clock (the sleeps and waits take ~20 ms, every other call microseconds), and how many
 *   of those took under 15 ms ("near"):
 *     pid=N settle.nanosleep=N settle.nanosleep.near=N slow_sleep_site.nanosleep=N ...
 *   The clock brackets the call from user space, so a profiler timing the call inside the
 *   kernel sees at most as many slow calls; a near call is one a few milliseconds of
 *   preemption outside the call (as under emulation) could have made slow here only.
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
#define NEAR_NS (3 * SLOW_NS)
#define CHUNK 4096

static int pipe_a[2], pipe_b[2];

/* Slow calls per site and function (each written by one thread, read after join). */
struct tally {
  const char* name;
  int slow; /* >= SLOW_NS */
  int near; /* ... and < NEAR_NS */
};
enum { SETTLE, SLEEP, READ, WRITE, PACER_SLEEP, PACER_WRITE, PACER_READ, TALLIES };
static struct tally tallies[TALLIES] = {
    [SETTLE] = {"settle.nanosleep"},          [SLEEP] = {"slow_sleep_site.nanosleep"},
    [READ] = {"slow_read_site.read"},         [WRITE] = {"slow_write_site.write"},
    [PACER_SLEEP] = {"pacer_site.nanosleep"}, [PACER_WRITE] = {"pacer_site.write"},
    [PACER_READ] = {"pacer_site.read"},
};

static uint64_t now_ns(void) {
  struct timespec ts;

  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* Counts the call that began at `start` if it was slow. */
static void tally(int which, uint64_t start) {
  uint64_t took = now_ns() - start;

  if (took >= SLOW_NS) {
    tallies[which].slow++;
    tallies[which].near += took < NEAR_NS;
  }
}

__attribute__((noinline)) void settle(long ms) {
  struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
  uint64_t t = now_ns();

  if (nanosleep(&ts, NULL) != 0) exit(3);
  tally(SETTLE, t);
}

__attribute__((noinline)) void slow_sleep_site(void) {
  for (int i = 0; i < ROUNDS; i++) {
    struct timespec ts = {0, PAUSE_NS};
    uint64_t t = now_ns();

    if (nanosleep(&ts, NULL) != 0) exit(3);
    tally(SLEEP, t);
  }
}

__attribute__((noinline)) void slow_read_site(void) {
  char c;

  for (int i = 0; i < ROUNDS; i++) {
    uint64_t t = now_ns();

    if (read(pipe_a[0], &c, 1) != 1) exit(3);
    tally(READ, t);
  }
}

__attribute__((noinline)) void slow_write_site(void) {
  static char chunk[CHUNK];

  for (int i = 0; i < ROUNDS + 1; i++) {
    uint64_t t = now_ns();

    if (write(pipe_b[1], chunk, CHUNK) != CHUNK) exit(3);
    tally(WRITE, t);
  }
}

__attribute__((noinline)) void pacer_site(void) {
  static char sink[CHUNK];

  for (int i = 0; i < ROUNDS; i++) {
    struct timespec ts = {0, PAUSE_NS};
    uint64_t t = now_ns();

    if (nanosleep(&ts, NULL) != 0) exit(3);
    tally(PACER_SLEEP, t);
    t = now_ns();
    if (write(pipe_a[1], "x", 1) != 1) exit(3);
    tally(PACER_WRITE, t);
    t = now_ns();
    if (read(pipe_b[0], sink, CHUNK) != CHUNK) exit(3);
    tally(PACER_READ, t);
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
  printf("pid=%d", (int)getpid());
  for (int i = 0; i < TALLIES; i++)
    printf(" %s=%d %s.near=%d", tallies[i].name, tallies[i].slow, tallies[i].name, tallies[i].near);
  printf("\n");
  fflush(stdout);
  return 0;
}
