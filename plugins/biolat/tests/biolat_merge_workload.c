// SPDX-License-Identifier: Apache-2.0
//
// P processes write, then read, neighbouring blocks of PATH at the same moments: in round
// i, process p (forked from this one) does one O_DIRECT pwrite of block i*P + p, all P of
// them released together by a process-shared barrier. On a disk that takes one command at
// a time the first goes to the device and the others wait in the queue next to each other,
// where the block layer merges them: each process's I/O may ride in another's request.
//
//   biolat_merge_workload PATH P N SIZE
#define _GNU_SOURCE
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

static int child(const char* path, long p, long procs, long n, size_t size,
                 pthread_barrier_t* barrier) {
  void* buf;
  if (posix_memalign(&buf, 4096, size)) return 1;
  memset(buf, 0x5a, size);
  int fd = open(path, O_RDWR | O_DIRECT);
  if (fd < 0) {
    perror(path);
    return 1;
  }
  for (int pass = 0; pass < 2; pass++)
    for (long i = 0; i < n; i++) {
      pthread_barrier_wait(barrier);
      off_t at = (off_t)((i * procs + p) * (long)size);
      ssize_t done = pass == 0 ? pwrite(fd, buf, size, at) : pread(fd, buf, size, at);
      if (done != (ssize_t)size) {
        perror(pass == 0 ? "pwrite" : "pread");
        return 1;
      }
    }
  close(fd);
  return 0;
}

int main(int argc, char** argv) {
  if (argc != 5) {
    fprintf(stderr, "usage: %s PATH P N SIZE\n", argv[0]);
    return 2;
  }
  long procs = atol(argv[2]), n = atol(argv[3]);
  size_t size = strtoul(argv[4], NULL, 0);
  if (procs <= 0 || n <= 0 || size == 0 || size % 4096) {
    fprintf(stderr, "bad P, N or SIZE (SIZE must be a multiple of 4096)\n");
    return 2;
  }
  pthread_barrier_t* barrier =
      mmap(NULL, sizeof(*barrier), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  pthread_barrierattr_t attr;
  if (barrier == MAP_FAILED || pthread_barrierattr_init(&attr) ||
      pthread_barrierattr_setpshared(&attr, PTHREAD_PROCESS_SHARED) ||
      pthread_barrier_init(barrier, &attr, (unsigned)procs)) {
    fprintf(stderr, "cannot make a shared barrier\n");
    return 1;
  }
  for (long p = 0; p < procs; p++) {
    pid_t pid = fork();
    if (pid < 0) {
      perror("fork");
      return 1;
    }
    if (pid == 0) _exit(child(argv[1], p, procs, n, size, barrier));
  }
  int failed = 0, status;
  while (wait(&status) > 0) failed |= !WIFEXITED(status) || WEXITSTATUS(status) != 0;
  return failed;
}
