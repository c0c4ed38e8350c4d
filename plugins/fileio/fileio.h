/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * Types shared by fileio.bpf.c and the user-space plugin: fixed-width fields only.
 */
#ifndef LOUPE_FILEIO_H
#define LOUPE_FILEIO_H

#ifndef __bpf__
#include <linux/types.h>
#endif

#include "loupe/ustack.h"

#define FIO_HIST_SLOTS 40 /* log2 ns */
#define FIO_PATH_DEPTH 16 /* components kept, from the file up (a power of two) */
#define FIO_NAME_LEN 64   /* bytes kept of each component */
#define FIO_COMM_LEN 16
#define FIO_STACK_DEPTH 64 /* user frames of a slow operation (fp) */

/* Ring record types (the slow ring carries both: fp stacks in the record, or a copy). */
#define FIO_RECORD_SLOW 1
#define FIO_RECORD_SLOW_VERSION 1
#define FIO_RECORD_SLOW_DWARF 2
#define FIO_RECORD_SLOW_DWARF_VERSION 1

enum fio_op {
  FIO_OP_OPEN = 1,
  FIO_OP_READ = 2,  /* read, pread64, readv, preadv, preadv2 */
  FIO_OP_WRITE = 3, /* write, pwrite64, writev, pwritev, pwritev2 */
  FIO_OP_FSYNC = 4, /* fsync, fdatasync */
  FIO_OP_STAT = 5,  /* fstat, newfstatat, statx, stat, lstat (by fd or by path) */
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

/* Failed calls by errno, per file (ino 0, dev 0: a failed open or stat-by-path, which
 * names no file). */
struct fio_err_key {
  __u64 ino;
  __u32 dev;
  __u16 op;
  __u16 err;
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
  __u16 truncated; /* the walk stopped at FIO_PATH_DEPTH: the path lacks its top */
  __u16 given;     /* comps[0] is the name a stat-by-path was given (never opened here) */
  char comps[FIO_PATH_DEPTH][FIO_NAME_LEN];
};

/* One operation at or above slow_us (fileslower's view), at its end. */
struct fio_slow {
  __u16 type;
  __u16 version;
  __u32 len;
  __u64 boot_ns; /* bpf_ktime_get_boot_ns() at the end */
  __u64 latency_ns;
  __u64 ino;
  __u64 offset;    /* the file position the call started at (-1: none, e.g. fsync) */
  __u64 requested; /* the size asked for (read/write count; 0 for vector calls) */
  __s64 ret;       /* bytes moved, or -errno */
  __u32 dev;
  __u32 op;
  __u32 pid;
  __u32 tid;
  __s32 n_user; /* frames in user_stack; < 0: bpf_get_stack error */
  __u32 pad;
  char comm[FIO_COMM_LEN];
  __u64 user_stack[FIO_STACK_DEPTH];
};

/* unwind = "dwarf": the record without its fp stack and the copied user stack;
 * us.stack_len bytes follow. */
struct fio_slow_dwarf {
  struct fio_slow e;
  struct loupe_ustack us;
};

struct fio_counters {
  __u64 calls;       /* file syscalls of the target seen */
  __u64 not_regular; /* on sockets, pipes, ttys...: skipped (regular_only) */
  __u64 no_file;     /* the fd named no open file (EBADF): counted only */
  __u64 open_errors; /* failed opens: no file to charge them to */
  __u64 inflight_full;
  __u64 stats_full;
  __u64 paths_full;
  __u64 errors_full; /* failed calls not broken down by errno: the errno table is full */
  __u64 slow;        /* slow operations sent as events */
  __u64 timed;       /* calls on a file that ended: in a (file, op) row or in stats_full */
};

#endif /* LOUPE_FILEIO_H */
