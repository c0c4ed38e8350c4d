/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/* Types shared by syscount.bpf.c and syscount.cpp: fixed-width, no pointers. */
#ifndef LOUPE_EXAMPLE_SYSCOUNT_H
#define LOUPE_EXAMPLE_SYSCOUNT_H

#ifndef __bpf__
#include <linux/types.h>
#endif

#define SYSCOUNT_COMM_LEN 16
#define SYSCOUNT_MAX_ENTRIES 16384
/* Syscall numbers below this are counted in an array (no hashing) when counts are not per
 * process; x86-64 has about 460. */
#define SYSCOUNT_ARRAY_NR 1024

/* tgid is 0 unless the plugin runs with per_process = true. */
struct syscount_key {
  __u32 tgid;
  __u32 nr;
};

/* One per-CPU slot; user space sums the slots. comm is written once, when the entry is
 * created on that CPU, so a process that exits before collect() keeps its name. */
struct syscount_val {
  __u64 count;
  char comm[SYSCOUNT_COMM_LEN];
};

#endif /* LOUPE_EXAMPLE_SYSCOUNT_H */
