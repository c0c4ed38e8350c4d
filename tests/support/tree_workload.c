// SPDX-License-Identifier: Apache-2.0
/*
 * A process tree with known work per process, for the process-tree tests of every
 * profiler that takes a target (tests/plugins/CMakeLists.txt builds it once).
 *
 *   tree_workload [--go FILE] [--late L] WORKERS MODE N
 *
 * The parent forks WORKERS workers (and, with --late, L more once FILE exists), each doing
 * the MODE work N times; the parent itself does the same work PARENT_N = 3 times (spin:
 * none), so "the target only" and "the whole tree" give different, known answers:
 *   syscalls N  getrusage(2) N times (a syscall nothing at start-up makes)
 *   spin N      N ms of user CPU in tree_spin()
 *   malloc N    N blocks of 12345 bytes from malloc, freed at exit
 *   lock N      two threads take one mutex N times each, holding it 1 ms: contention
 * With --go FILE the early workers wait until FILE exists before working, and the parent
 * writes FILE.ready once they are forked (a session attaching with --pid starts then).
 * Workers' comm is "tree_worker". Exits 0 when every worker exited 0.
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define PARENT_N 3

static const char* mode;
static long n;
static const char* go;

static double thread_cpu_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

__attribute__((noinline)) void tree_spin(long ms) {
  volatile unsigned long x = 0;
  double end = thread_cpu_ms() + (double)ms;
  while (thread_cpu_ms() < end)
    for (int i = 0; i < 10000; i++) x += (unsigned long)i * 7;
}

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;

static void* locker(void* arg) {
  (void)arg;
  for (long i = 0; i < n; i++) {
    pthread_mutex_lock(&lock);
    struct timespec d = {0, 1000000};
    nanosleep(&d, NULL);
    pthread_mutex_unlock(&lock);
    sched_yield();
  }
  return NULL;
}

static void work(long times, int worker) {
  if (!strcmp(mode, "syscalls")) {
    struct rusage ru;
    for (long i = 0; i < times; i++) getrusage(RUSAGE_SELF, &ru);
  } else if (!strcmp(mode, "spin")) {
    if (worker) tree_spin(times);
  } else if (!strcmp(mode, "malloc")) {
    void** keep = calloc((size_t)times, sizeof(void*));
    for (long i = 0; i < times; i++) {
      keep[i] = malloc(12345);
      memset(keep[i], 1, 64);
    }
    for (long i = 0; i < times; i++) free(keep[i]);
    free(keep);
  } else if (!strcmp(mode, "lock")) {
    if (worker) {
      pthread_t a, b;
      pthread_create(&a, NULL, locker, NULL);
      pthread_create(&b, NULL, locker, NULL);
      pthread_join(a, NULL);
      pthread_join(b, NULL);
    }
  }
}

static void wait_for_go(void) {
  struct stat st;
  while (go && stat(go, &st) != 0) usleep(10000);
}

static pid_t spawn(void) {
  pid_t p = fork();
  if (p == 0) {
    prctl(PR_SET_NAME, "tree_worker");
    wait_for_go();
    work(n, 1);
    _exit(0);
  }
  return p;
}

int main(int argc, char** argv) {
  int late = 0, a = 1;
  for (; a < argc && !strncmp(argv[a], "--", 2); a += 2) {
    if (!strcmp(argv[a], "--go"))
      go = argv[a + 1];
    else if (!strcmp(argv[a], "--late"))
      late = atoi(argv[a + 1]);
  }
  if (argc - a != 3) {
    fprintf(stderr, "usage: %s [--go FILE] [--late L] WORKERS MODE N\n", argv[0]);
    return 2;
  }
  int workers = atoi(argv[a]);
  mode = argv[a + 1];
  n = atol(argv[a + 2]);
  pid_t pids[256];
  int np = 0;
  for (int i = 0; i < workers && np < 256; i++) pids[np++] = spawn();
  if (go) {
    char ready[4096];
    snprintf(ready, sizeof(ready), "%s.ready", go);
    FILE* f = fopen(ready, "w");
    if (f) fclose(f);
    wait_for_go();
    for (int i = 0; i < late && np < 256; i++) pids[np++] = spawn();
  }
  work(PARENT_N, 0);
  int ok = 1;
  for (int i = 0; i < np; i++) {
    int st = 0;
    waitpid(pids[i], &st, 0);
    ok &= WIFEXITED(st) && WEXITSTATUS(st) == 0;
  }
  printf("tree_workload: %d workers, mode %s, n %ld, parent %d\n", np, mode, n, PARENT_N);
  return ok ? 0 : 1;
}
