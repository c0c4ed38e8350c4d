/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * Types shared by jitregions.bpf.c and the user-space plugin: fixed-width fields only.
 */
#ifndef LOUPE_JITREGIONS_H
#define LOUPE_JITREGIONS_H

#ifndef __bpf__
#include <linux/types.h>
#endif

#define JR_RECORD 1
#define JR_RECORD_VERSION 1
#define JR_COMM_LEN 16

/* One ring carries every kind, so region changes and samples keep their order. */
enum jr_kind {
  JR_MMAP = 1,     /* mmap with PROT_EXEC (or MAP_FIXED over a tracked process's range) */
  JR_MPROTECT = 2, /* mprotect: prot says whether PROT_EXEC is added or removed */
  JR_MUNMAP = 3,
  JR_SAMPLE = 4, /* a cpu-clock sample of a tracked process: addr = user IP */
  JR_EXIT = 5,   /* the process exited */
  JR_EXEC = 6,   /* the process exec'd: its regions are gone */
};

struct jr_event {
  __u16 type;
  __u16 version;
  __u32 len;
  __u64 boot_ns;
  __u32 kind;
  __u32 tgid;
  __u32 tid;
  __u32 prot;
  __u64 addr;
  __u64 length;
  __u32 flags;     /* mmap flags */
  __s32 fd;        /* mmap fd (-1 anonymous) */
  __u32 in_kernel; /* JR_SAMPLE: the CPU was in kernel mode on behalf of this task */
  __u32 pad;
  char comm[JR_COMM_LEN];
};

/* Syscall arguments kept from sys_enter to sys_exit, per thread. */
struct jr_pending {
  __u64 addr;
  __u64 length;
  __u32 prot;
  __u32 flags;
  __s32 fd;
  __u32 kind;
};

struct jr_counters {
  __u64 samples;         /* samples of tracked processes sent to the ring */
  __u64 samples_no_user; /* samples without a readable user IP */
  __u64 pending_full;    /* syscalls lost: the in-flight map was full */
  __u64 procs_full;      /* processes not tracked: the process map was full */
};

#endif /* LOUPE_JITREGIONS_H */
