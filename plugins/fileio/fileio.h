/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * Types shared by fileio.bpf.c and the user-space plugin: fixed-width fields only.
 */
#ifndef LOUPE_FILEIO_H
#define LOUPE_FILEIO_H

#ifndef __bpf__
#include <linux/types.h>
#endif

#define FIO_HIST_SLOTS 40 /* log2 ns */
#define FIO_PATH_DEPTH 16 /* components kept, from the file up (a power of two) */
#define FIO_NAME_LEN 64   /* bytes kept of each component */

enum fio_op {
  FIO_OP_OPEN = 1,
  FIO_OP_READ = 2,  /* read, pread64, readv, preadv, preadv2 */
  FIO_OP_WRITE = 3, /* write, pwrite64, writev, pwritev, pwritev2 */
  FIO_OP_FSYNC = 4, /* fsync, fdatasync */
  FIO_OP_STAT = 5,  /* fstat (by fd) */
  FIO_OP_CLOSE = 6,
  FIO_OP_NR = 7,
};

/* A file by device and inode: renames and hard links neither split nor merge it. */
struct fio_key {
  __u64 ino;
  __u32 dev; /* the kernel's dev_t: major << 20 | minor */
  __u32 op;
};

struct fio_stats {
  __u64 count;
  __u64 bytes;
  __u64 errors;
  __u64 total_ns;
  __u64 max_ns;
  __u64 slots[FIO_HIST_SLOTS];
};

struct fio_file {
  __u64 ino;
  __u32 dev;
  __u32 pad;
};

/* The path, as the kernel's dentries spell it at the last open (or first sight): the
 * components from the file up to the root, across mounts. */
struct fio_path {
  __u32 depth;
  __u32 truncated; /* the walk stopped at FIO_PATH_DEPTH: the path lacks its top */
  char comps[FIO_PATH_DEPTH][FIO_NAME_LEN];
};

struct fio_counters {
  __u64 calls;       /* file syscalls of the target seen */
  __u64 not_regular; /* on sockets, pipes, ttys...: skipped (regular_only) */
  __u64 no_file;     /* the fd named no open file (EBADF): counted only */
  __u64 open_errors; /* failed opens: no file to charge them to */
  __u64 inflight_full;
  __u64 stats_full;
  __u64 paths_full;
};

#endif /* LOUPE_FILEIO_H */
