// SPDX-License-Identifier: Apache-2.0
//
// N O_DIRECT writes then N O_DIRECT reads of SIZE bytes each, sequential from offset 0,
// to PATH (a file or a block device). Each call waits for its I/O, so requests cannot
// merge with one another; SIZE stays below the queue's max_sectors_kb so none is split.
// The file must already hold N*SIZE written bytes (the caller prepares it), so the
// writes are overwrites: no block allocation and no metadata I/O from this process.
//
//   biolat_workload PATH N SIZE
#define _GNU_SOURCE
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

int main(int argc, char** argv) {
  if (argc != 4) {
    fprintf(stderr, "usage: %s PATH N SIZE\n", argv[0]);
    return 2;
  }
  long n = atol(argv[2]);
  size_t size = strtoul(argv[3], NULL, 0);
  void* buf;
  if (n <= 0 || size == 0 || size % 4096 || posix_memalign(&buf, 4096, size)) {
    fprintf(stderr, "bad N or SIZE (SIZE must be a multiple of 4096)\n");
    return 2;
  }
  memset(buf, 0x5a, size);
  int fd = open(argv[1], O_RDWR | O_DIRECT);
  if (fd < 0) {
    perror(argv[1]);
    return 1;
  }
  for (long i = 0; i < n; i++)
    if (pwrite(fd, buf, size, (off_t)(i * size)) != (ssize_t)size) {
      perror("pwrite");
      return 1;
    }
  for (long i = 0; i < n; i++)
    if (pread(fd, buf, size, (off_t)(i * size)) != (ssize_t)size) {
      perror("pread");
      return 1;
    }
  close(fd);
  return 0;
}
