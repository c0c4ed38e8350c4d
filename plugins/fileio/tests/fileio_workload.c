// SPDX-License-Identifier: Apache-2.0
/*
 * Known file activity in DIR (which holds b.dat, 400 KiB, made before the run):
 *   a.dat: created, 100 writes of 4 KiB with an fsync after every 10th, closed;
 *   b.dat: opened, 50 reads of 8 KiB, closed;
 *   c.tmp: created, 1000 bytes written, closed, renamed to d.tmp, reopened, 1000 bytes
 *          read, closed, deleted (one file: the same inode under two names);
 *   stats: a.dat 5 x by path (stat), 2 x by statx, b.dat 3 x fstat on its fd, e.dat (made
 *          before the run, never opened) 2 x stat by the relative name "e.dat";
 *   failures: 3 opens of DIR for writing (EISDIR), 2 stats of "a.dat/x" (ENOTDIR),
 *          4 writes to b.dat's read-only fd (EBADF).
 * Usage: fileio_workload DIR
 */
#define _GNU_SOURCE
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static void path(char* out, const char* dir, const char* name) {
  snprintf(out, 4096, "%s/%s", dir, name);
}

int main(int argc, char** argv) {
  char p[4096], q[4096], buf[8192];
  int fd;

  if (argc != 2) return 2;
  memset(buf, 'a', sizeof(buf));
  path(p, argv[1], "a.dat");
  if ((fd = open(p, O_WRONLY | O_CREAT | O_TRUNC, 0600)) < 0) return 3;
  for (int i = 0; i < 100; i++) {
    if (write(fd, buf, 4096) != 4096) return 4;
    if (i % 10 == 9) fsync(fd);
  }
  close(fd);

  path(p, argv[1], "b.dat");
  if ((fd = open(p, O_RDONLY)) < 0) return 5;
  for (int i = 0; i < 50; i++)
    if (read(fd, buf, 8192) != 8192) return 6;
  struct stat st;
  for (int i = 0; i < 3; i++)
    if (fstat(fd, &st) != 0) return 12;
  for (int i = 0; i < 4; i++)
    if (write(fd, buf, 10) != -1) return 13;
  close(fd);

  path(p, argv[1], "a.dat");
  for (int i = 0; i < 5; i++)
    if (stat(p, &st) != 0) return 14;
  struct statx stx;
  for (int i = 0; i < 2; i++)
    if (statx(AT_FDCWD, p, 0, STATX_BASIC_STATS, &stx) != 0) return 15;
  if (chdir(argv[1]) != 0) return 16;
  for (int i = 0; i < 2; i++)
    if (stat("e.dat", &st) != 0) return 17;
  for (int i = 0; i < 2; i++)
    if (stat("a.dat/x", &st) != -1) return 18;
  for (int i = 0; i < 3; i++)
    if (open(argv[1], O_WRONLY) != -1) return 19;

  path(p, argv[1], "c.tmp");
  path(q, argv[1], "d.tmp");
  if ((fd = open(p, O_WRONLY | O_CREAT | O_TRUNC, 0600)) < 0) return 7;
  if (write(fd, buf, 1000) != 1000) return 8;
  close(fd);
  if (rename(p, q) != 0) return 9;
  if ((fd = open(q, O_RDONLY)) < 0) return 10;
  if (read(fd, buf, 1000) != 1000) return 11;
  close(fd);
  unlink(q);
  return 0;
}
