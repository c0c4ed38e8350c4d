// SPDX-License-Identifier: Apache-2.0
//
// loupe-demo: the bundled workload the default profile runs against. It behaves like a
// small server with known, varied latencies so every default plugin has something to show:
//   - handle_request(): called in a loop, sleeping 1-4 ms (a latency pair target);
//   - file I/O: writes then reads a scratch file (read/write syscalls);
//   - allocations of a few sizes, some kept (memory profilers).
// Usage: loupe-demo [seconds=3]
#define _GNU_SOURCE
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static double now_s(void) {
  struct timespec ts;

  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec + ts.tv_nsec / 1e9;
}

__attribute__((noinline)) void handle_request(unsigned i) {
  struct timespec d = {0, (long)(1 + i % 4) * 1000000L};

  nanosleep(&d, NULL);
}

__attribute__((noinline)) void* keep_some(unsigned i) {
  return malloc(64u << (i % 6));
}

int main(int argc, char** argv) {
  double seconds = argc > 1 ? atof(argv[1]) : 3.0;
  char path[] = "/tmp/loupe-demo-XXXXXX";
  int fd = mkstemp(path);
  char buf[4096];
  unsigned i = 0, requests = 0;
  void* kept[64] = {0};

  if (fd < 0) {
    perror("loupe-demo: mkstemp");
    return 1;
  }
  unlink(path);
  memset(buf, 'x', sizeof(buf));
  for (double end = now_s() + seconds; now_s() < end; i++) {
    handle_request(i);
    requests++;
    if (pwrite(fd, buf, sizeof(buf), (off_t)(i % 256) * sizeof(buf)) < 0)
      perror("loupe-demo: pwrite");
    if (pread(fd, buf, sizeof(buf), (off_t)((i * 7) % 256) * sizeof(buf)) < 0)
      perror("loupe-demo: pread");
    free(kept[i % 64]);
    kept[i % 64] = keep_some(i);
  }
  for (unsigned k = 0; k < 64; k++) free(kept[k]);
  close(fd);
  printf("loupe-demo: %u requests in %.1f s\n", requests, seconds);
  return 0;
}
