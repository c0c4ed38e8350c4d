/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * Types shared by lockwait.bpf.c and the user-space plugin: fixed-width fields only,
 * no pointers, so both compilers agree on the layout.
 */
#ifndef LOUPE_LOCKWAIT_H
#define LOUPE_LOCKWAIT_H

#ifndef __bpf__
#include <linux/types.h>
#endif

#include "loupe/ustack.h"

#define LW_STACK_DEPTH 64
#define LW_HIST_SLOTS 40 /* log2 ns: 2^39 ns ~ 9 min is the last slot, it takes the rest */

/* futex ops (linux/futex.h) that put the caller to sleep; everything else is ignored. */
#define LW_FUTEX_WAIT 0
#define LW_FUTEX_LOCK_PI 6
#define LW_FUTEX_WAIT_BITSET 9
#define LW_FUTEX_WAIT_REQUEUE_PI 11
#define LW_FUTEX_LOCK_PI2 13
#define LW_FUTEX_CMD_MASK (~(128 | 256)) /* PRIVATE_FLAG | CLOCK_REALTIME */

/* Where a wait happened. */
enum lw_kind {
  LW_KIND_FUTEX = 1,  /* user space: a futex wait syscall, addr = the futex word */
  LW_KIND_KERNEL = 2, /* lock:contention_begin/end, addr = the kernel lock */
};

/* lock:contention_begin flags (include/trace/events/lock.h, LCB_F_*). */
#define LW_LCB_SPIN (1U << 0)
#define LW_LCB_READ (1U << 1)
#define LW_LCB_WRITE (1U << 2)
#define LW_LCB_RT (1U << 3)
#define LW_LCB_PERCPU (1U << 4)
#define LW_LCB_MUTEX (1U << 5)

/* Indices of the per-CPU counters array. */
enum lw_counter {
  LW_C_FUTEX_BEGIN,   /* futex waits that started (after filters) */
  LW_C_FUTEX_MATCHED, /* ... that ended and were recorded */
  LW_C_KERNEL_BEGIN,  /* kernel contentions that started */
  LW_C_KERNEL_MATCHED,
  LW_C_UNMATCHED,     /* an end without its begin (attached mid-wait) */
  LW_C_EXPIRED,       /* a begin older than max_age replaced by a newer one */
  LW_C_DISCARDED,     /* impossible durations (negative or above max_age) */
  LW_C_INFLIGHT_FULL, /* the in-flight map refused a begin: that wait is lost */
  LW_C_LOCKS_FULL,    /* the per-lock map is full: wait only in the totals below */
  LW_C_WAITERS_FULL,  /* the per-(lock, thread, stack) map is full */
  LW_C_USTACK_FAIL,   /* bpf_get_stackid failed for the user stack */
  LW_C_KSTACK_FAIL,
  LW_C_NON_WAIT_OPS,    /* futex calls that are not waits (wake, requeue, ...) */
  LW_C_PTHREAD_CALLS,   /* uprobe hits on pthread lock entry points */
  LW_C_PTHREAD_STACKS,  /* futex waits attributed to the stack of a pthread call */
  LW_C_LOST_NS,         /* wait time not attributed to a lock because a map was full */
  LW_C_FIRST_SEEN_LOST, /* first-seen notifications that did not fit in the ring */
  LW_C_WAKES,           /* holders: futex wake calls of the target seen */
  LW_C_RELEASED_WAITS,  /* holders: futex waits ended by a wake seen during them */
  LW_C_HOLDERS_FULL,    /* holders: the (lock, releaser stack) map is full */
  LW_C_WAKES_FULL,      /* holders: a wake not kept (the LRU map found no memory) */
  LW_C_PENDING_FULL,    /* pthread stacks: the entry map is full, the futex's own stack used */
  LW_C_NR,
};

/* In-flight key: one thread, one kind, one lock (futex exits do not say which futex, and a
 * thread sits in one syscall at a time, so futex waits use addr = 0 here). */
struct lw_inflight_key {
  __u32 tid;
  __u32 kind;
  __u64 addr;
};

struct lw_inflight_val {
  __u64 start_ns;
  __u64 addr;
  __s32 user_stack_id; /* < 0: none or failed */
  __s32 kernel_stack_id;
  __u32 flags;     /* kernel: LCB_F_*; futex: the futex op */
  __u32 idle;      /* futex slot kept for the thread's next wait, not a wait */
  __u64 caller_ip; /* pthread_stacks: the return address at the uprobe, else 0 */
};

struct lw_lock_key {
  __u32 tgid; /* 0 for kernel locks */
  __u32 kind;
  __u64 addr;
};

struct lw_lock_val {
  __u64 waits;
  __u64 total_ns;
  __u64 max_ns;
  __u64 min_ns;
  __u32 flags;        /* OR of the LCB_F_* (kernel) seen for this lock */
  __u32 threads_hint; /* unused by BPF: layout padding */
  __u64 slots[LW_HIST_SLOTS];
};

/* One row per (lock, thread, stack pair): the per-thread breakdown and the top stacks
 * are both folded out of it in user space. */
struct lw_waiter_key {
  __u32 tgid;
  __u32 tid;
  __u64 addr;
  __u32 kind;
  __s32 user_stack_id;
  __s32 kernel_stack_id;
  __u32 pad;
  /* pthread_stacks: the return address read at the pthread call's entry. Unwinding
   * there starts from the caller's frame pointer, which skips the direct caller; this
   * puts it back. */
  __u64 caller_ip;
};

struct lw_waiter_val {
  __u64 waits;
  __u64 total_ns;
  __u64 max_ns;
  char comm[16];
  /* The start of the thread's first wait on the lock and the end of its last (written by
   * that thread only: the key holds its tid): the span the finding's share is over. */
  __u64 first_ns;
  __u64 last_ns;
};

/* holders: the last futex wake on a futex word, by the thread that released it. */
struct lw_wake_val {
  __u64 ts;
  __u32 tid;
  __s32 user_stack_id; /* the releaser's stack at the wake; < 0: none */
  char comm[16];
};

/* holders: the wait time that ended with a wake, per (lock, releaser's stack). */
struct lw_holder_key {
  __u32 tgid;
  __s32 user_stack_id;
  __u64 addr;
};

struct lw_holder_val {
  __u64 waits;
  __u64 total_ns;
  char comm[16]; /* the releasing thread's, at the first wake */
};

/* A pthread lock call seen by the optional uprobe: its stack stands in for the futex
 * wait's own (which frame-pointer unwinding through libc truncates). */
struct lw_pending_val {
  __u64 lock; /* the pthread object's address */
  __u64 ts;
  __s32 user_stack_id;
  __u32 pad;
  __u64 caller_ip;
};

/* Ring records: the first wait on a lock or with a stack, so user space names them while
 * the process is alive (the final report usually comes after it exited). */
#define LW_RECORD_FIRST_SEEN 1
#define LW_RECORD_FIRST_SEEN_VERSION 1

struct lw_first_seen_event {
  __u16 type;
  __u16 version;
  __u32 len;
  __u32 tgid;
  __u32 kind;
  __u64 addr;
  __s32 user_stack_id;
  __s32 kernel_stack_id;
  __u64 caller_ip;
};

/* unwind = "dwarf": one futex wait with a copy of the waiting thread's user stack (its
 * registers at the syscall; us.stack_len bytes follow). User space unwinds it and keeps
 * the (lock, thread, stack) rows the kernel keeps by stack id in the fp mode. */
#define LW_RECORD_DWARF_WAIT 2
#define LW_RECORD_DWARF_WAIT_VERSION 2

struct lw_dwarf_wait {
  __u16 type;
  __u16 version;
  __u32 len;
  __u32 tgid;
  __u32 tid;
  __u64 addr;
  __u64 delta_ns;
  __u64 end_ns; /* bpf_ktime_get_ns() at the wait's end */
  char comm[16];
  struct loupe_ustack us;
};

#endif /* LOUPE_LOCKWAIT_H */
