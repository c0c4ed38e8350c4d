/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * Types shared by latency.bpf.c and the user-space plugin: fixed-width fields only,
 * no pointers, so both compilers agree on the layout.
 */
#ifndef LOUPE_LATENCY_H
#define LOUPE_LATENCY_H

#ifndef __bpf__
#include <linux/types.h>
#endif

#include "loupe/hist.h"
#include "loupe/ustack.h"

/* Targets are indexed 0..LAT_MAX_TARGETS-1; the index travels in the attach cookie. */
#define LAT_MAX_TARGETS 64
/* Timestamps kept per thread and target for nesting = "every"; deeper levels are still
 * paired (depth is tracked) but not timed, and counted as depth_overflow. */
#define LAT_MAX_DEPTH 16
/* fentry programs are bound to one kernel function at load time, so kernel-function
 * targets on the fentry path use one program pair per slot. */
#define LAT_FENTRY_SLOTS 4
#define LAT_STACK_DEPTH 32
#define LAT_COMM_LEN 16

#define LAT_RECORD_OUTLIER 1
#define LAT_RECORD_OUTLIER_VERSION 1
/* unwind = "dwarf": an outlier whose user stack is a copy to unwind in user space. */
#define LAT_RECORD_OUTLIER_DWARF 2
#define LAT_RECORD_OUTLIER_DWARF_VERSION 1

enum lat_nesting {
  LAT_NEST_OUTERMOST = 0,
  LAT_NEST_EVERY = 1,
};

/* Per-target counters, one slot per CPU (summed in user space). */
struct lat_counters {
  __u64 calls;                /* entries seen that passed the filters (every level) */
  __u64 matched;              /* exits that found their entry (every level) */
  __u64 unmatched_exits;      /* exits without an entry, on a thread whose entries were seen */
  __u64 expired;              /* entries found older than max_age and replaced */
  __u64 discarded;            /* impossible durations: negative or > max_age */
  __u64 below_min;            /* paired, shorter than min_duration_ns, not recorded */
  __u64 depth_overflow;       /* nested deeper than LAT_MAX_DEPTH: paired, not timed */
  __u64 map_full;             /* the correlation map refused an insert */
  __u64 outliers;             /* durations >= outlier_ns sent to the ring */
  __u64 outliers_sampled_out; /* outliers skipped because the core asked for 1 in N */
  __u64 breakdown_overflow;   /* per-pid/comm map full: recorded in the target total only */
  __u64 label_overflow;       /* per-label map full: recorded in the target total only */
  __u64 site_unresolved;      /* a call whose site could not be told (counted under "?") */
  __u64 sites_lost;           /* the per-site map refused a site: in the target total only */
  __u64 label_unreadable;     /* a label argument that could not be read (a bad pointer) */
  __u64 began_before_attach;  /* exits of a thread with no entry seen yet: calls in flight
                                 when tracing began (at most one per thread and level) */
};

/* Correlation key: one thread inside one target. */
struct lat_start_key {
  __u64 pid_tgid;
  __u32 target;
  __u32 pad;
};

struct lat_start_val {
  __u32 depth; /* current nesting level of this thread in this target */
  __u32 pad;
  __u64 ts[LAT_MAX_DEPTH]; /* bpf_ktime_get_ns() at entry, per level */
};

/* Key of the optional per-pid / per-comm breakdown (unused fields zero). */
struct lat_breakdown_key {
  __u32 target;
  __u32 pid;
  char comm[LAT_COMM_LEN];
};

/* A USDT argument as a label: an integer, or a string read from the pointer it holds
 * (cut at LAT_LABEL_LEN - 1 bytes). */
#define LAT_LABEL_LEN 48
struct lat_label {
  __s64 num;
  char str[LAT_LABEL_LEN];
};

/* Key of the per-label histograms (pairs) and counts (single probes). */
struct lat_label_key {
  __u32 target;
  __u32 pad;
  struct lat_label label;
};

/* Calls of a USDT target per probe site (one probe name often has several), summed over
 * every process that fired it: the site is its offset in the probed file, the same in
 * every process whatever address the file is mapped at, named by user space from the
 * file when it attaches. */
#define LAT_SITE_UNKNOWN (~0ULL)
struct lat_site_key {
  __u32 target;
  __u32 pad;
  __u64 file_offset; /* LAT_SITE_UNKNOWN: the site could not be told */
};

/* Executables the target's processes exec'd, by inode: what a probe on another binary
 * that never fired is reported against. */
#define LAT_EXEC_PATH_LEN 256
#define LAT_MAX_EXECS 64
struct lat_exec_key {
  __u64 dev; /* the kernel's dev_t of the file's superblock: major << 20 | minor */
  __u64 ino;
};

struct lat_exec_val {
  __u64 count;
  char path[LAT_EXEC_PATH_LEN]; /* as the first exec spelt it */
};

/* The label each open nesting level of one thread in one target was entered with. */
struct lat_level_labels {
  struct lat_label level[LAT_MAX_DEPTH];
};

/* Ring record for one outlier; starts with the loupe ring header. */
struct lat_outlier_event {
  __u16 type;
  __u16 version;
  __u32 len;
  __u64 boot_ns; /* bpf_ktime_get_boot_ns() at exit */
  __u64 duration_ns;
  __u32 pid;
  __u32 tid;
  __u32 target;
  __u32 depth; /* nesting level the duration belongs to (1 = outermost) */
  char comm[LAT_COMM_LEN];
  __s32 n_user; /* frames in user_stack; < 0: bpf_get_stack error */
  __s32 n_kernel;
  __u64 user_stack[LAT_STACK_DEPTH];
  __u64 kernel_stack[LAT_STACK_DEPTH];
};

/* unwind = "dwarf": the outlier (n_user 0, user_stack unused) and the copied user stack;
 * us.stack_len bytes follow. */
struct lat_outlier_dwarf {
  struct lat_outlier_event e;
  struct loupe_ustack us;
};

#endif /* LOUPE_LATENCY_H */
