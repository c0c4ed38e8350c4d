// SPDX-License-Identifier: Apache-2.0
//
// A workload with known allocation sites for the memalloc profiler's tests. Built -O0
// with frame pointers; every site is its own noinline function so the symbolized caller
// of the allocator names the site.
//
//   memalloc_workload
//     ma_leak_4k:        1000 x malloc(4096), never freed       -> leaks 4,096,000 B
//     ma_churn_64:      10000 x malloc(64) + free               -> no leak
//     ma_calloc_site:     100 x calloc(16, 32) + free           -> no leak
//     ma_leak_1m:           1 x malloc(1 MiB), never freed      -> leaks 1,048,576 B
//     ma_realloc_site:     50 x malloc(100), realloc 200, realloc 5000, free -> no leak
//     ma_memalign_leak:    10 x posix_memalign(64, 256), never freed -> leaks 2,560 B
//     ma_aligned_site:     10 x aligned_alloc(64, 128) + free   -> no leak
//
//   memalloc_workload aged MS
//     ma_leak_4k(1000), then MS ms later ma_young_leak: 1000 x malloc(4096) never freed,
//     just before exit: two sites holding the same bytes, of different ages
//
//   memalloc_workload threads T
//     T threads at once, each: 2000 x malloc(48) + free in ma_thread_churn, then
//     50 x malloc(512) never freed in ma_thread_leak
#define _GNU_SOURCE
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static void* volatile keep[2048];
static int nkeep;

__attribute__((noinline)) void ma_leak_4k(int n) {
  for (int i = 0; i < n; i++) {
    char* p = malloc(4096);

    p[0] = 1;
    keep[nkeep++ % 2048] = p;
  }
}

__attribute__((noinline)) void ma_churn_64(int n) {
  for (int i = 0; i < n; i++) {
    char* volatile p = malloc(64);

    p[0] = 1;
    free(p);
  }
}

__attribute__((noinline)) void ma_calloc_site(int n) {
  for (int i = 0; i < n; i++) {
    char* volatile p = calloc(16, 32);

    free(p);
  }
}

__attribute__((noinline)) void ma_leak_1m(void) {
  char* p = malloc(1 << 20);

  memset(p, 1, 4096);
  keep[nkeep++ % 2048] = p;
}

__attribute__((noinline)) void ma_realloc_site(int n) {
  for (int i = 0; i < n; i++) {
    char* p = malloc(100);

    p = realloc(p, 200);
    p = realloc(p, 5000);
    free(p);
  }
}

__attribute__((noinline)) void ma_memalign_leak(int n) {
  for (int i = 0; i < n; i++) {
    void* p = NULL;

    if (posix_memalign(&p, 64, 256) == 0) keep[nkeep++ % 2048] = p;
  }
}

__attribute__((noinline)) void ma_aligned_site(int n) {
  for (int i = 0; i < n; i++) {
    char* volatile p = aligned_alloc(64, 128);

    free(p);
  }
}

__attribute__((noinline)) void ma_thread_churn(int n) {
  for (int i = 0; i < n; i++) {
    char* volatile p = malloc(48);

    free(p);
  }
}

__attribute__((noinline)) void ma_thread_leak(void** out, int n) {
  for (int i = 0; i < n; i++) out[i] = malloc(512);
}

__attribute__((noinline)) void ma_young_leak(int n) {
  for (int i = 0; i < n; i++) {
    char* p = malloc(4096);

    memset(p, 2, 64);
    keep[nkeep++ % 2048] = p;
  }
}

static void* thread_main(void* arg) {
  ma_thread_churn(2000);
  ma_thread_leak(arg, 50);
  return NULL;
}

static int run_threads(int t) {
  static void* leaked[64][50];
  pthread_t tid[64];

  if (t < 1 || t > 64) return 2;
  for (int i = 0; i < t; i++)
    if (pthread_create(&tid[i], NULL, thread_main, leaked[i])) return 1;
  for (int i = 0; i < t; i++) pthread_join(tid[i], NULL);
  return 0;
}

int main(int argc, char** argv) {
  if (argc == 3 && strcmp(argv[1], "threads") == 0) return run_threads(atoi(argv[2]));
  if (argc == 3 && strcmp(argv[1], "aged") == 0) {
    long ms = atol(argv[2]);
    struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};

    ma_leak_4k(1000);
    nanosleep(&ts, NULL);
    /* When the young allocations began (CLOCK_REALTIME, as loupe's windows): on a loaded
     * machine the session may end long after the exit, and then they are old too. */
    struct timespec now;
    clock_gettime(CLOCK_REALTIME, &now);
    printf("young_start_ns=%lld\n", (long long)now.tv_sec * 1000000000LL + now.tv_nsec);
    fflush(stdout);
    ma_young_leak(1000);
    return 0;
  }
  ma_leak_4k(1000);
  ma_churn_64(10000);
  ma_calloc_site(100);
  ma_leak_1m();
  ma_realloc_site(50);
  ma_memalign_leak(10);
  ma_aligned_site(10);
  return 0;
}
