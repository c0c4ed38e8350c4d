/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * Types shared by offcpu.bpf.c and the user-space plugin: fixed-width fields only.
 */
#ifndef LOUPE_OFFCPU_H
#define LOUPE_OFFCPU_H

#ifndef __bpf__
#include <linux/types.h>
#endif

#define OC_MAX_STACK_DEPTH 127
#define OC_COMM_LEN 16
#define OC_HIST_SLOTS 40 /* log2 ns: 2^39 ns ~ 9 min is the last slot, it takes the rest */

/* Why a thread left the CPU, from its state at the switch. */
enum oc_reason {
  OC_REASON_SLEEP = 1,     /* S: interruptible sleep (poll, read on a pipe, nanosleep...) */
  OC_REASON_DISK = 2,      /* D: uninterruptible (usually I/O or a kernel lock) */
  OC_REASON_PREEMPTED = 3, /* R: still runnable: preempted, or it yielded */
  OC_REASON_IDLE = 4,      /* I: TASK_IDLE, a kernel thread waiting for work */
  OC_REASON_OTHER = 5,     /* stopped, traced, parked, frozen */
};

/* A thread of the target: what its last switch-out saw while it is off the CPU
 * (running = 0); when it was switched back in while it runs (running = 1). The entry lives
 * from its first switch-out to its last switch (exit), so that a switch the program never
 * saw is noticed at the thread's next one (seen on a busy host: a few per second-long run,
 * with no other program on sched_switch and no recursion miss counted; cause unknown). */
struct oc_blocked {
  __u64 ts_out;  /* when it left the CPU */
  __u64 ts_wake; /* when it was woken (0: not yet, or preempted) */
  __u32 tgid;
  __u32 reason;
  __s32 user_stack_id; /* < 0: none (kernel thread, off, or failed: counters) */
  __s32 kernel_stack_id;
  __u32 waker_tgid; /* wakers = true: who woke it (0: not woken yet) */
  __u32 waker_tid;
  __s32 waker_user_stack_id;
  __s32 waker_kernel_stack_id;
  char comm[OC_COMM_LEN];
  char waker_comm[OC_COMM_LEN];
  __u64 runtime; /* the thread's CPU time (se.sum_exec_runtime) at the last switch seen */
  __u64 ts_in;   /* running: when it was switched in */
  __u32 running;
  __u32 weight; /* thinning: 0 = this block is not sampled, else the events it stands for */
};

/* One aggregation slot of off-CPU time: per (process, thread?, stacks, reason, waker). */
struct oc_key {
  __u32 tgid;
  __u32 tid; /* 0 unless per_thread */
  __s32 user_stack_id;
  __s32 kernel_stack_id;
  __u32 reason;
  __u32 waker_tgid; /* 0 when wakers are off or it was not woken (preempted) */
  __s32 waker_user_stack_id;
  __s32 waker_kernel_stack_id;
  char comm[OC_COMM_LEN];
  char waker_comm[OC_COMM_LEN];
};

struct oc_val {
  __u64 total_ns;
  __u64 count;
};

/* The task that held a CPU while a woken (or preempted) thread of the target waited for
 * it longer than runq_threshold_ns. */
struct oc_blocker_key {
  __u32 tgid;
  __s32 user_stack_id;
  __s32 kernel_stack_id;
  __u32 pad;
  char comm[OC_COMM_LEN];
};

struct oc_blocker_val {
  __u64 count;
  __u64 delay_ns;
};

struct oc_hist {
  __u64 count;
  __u64 sum;
  __u64 min;
  __u64 max;
  __u64 slots[OC_HIST_SLOTS];
};

/* Per-CPU counters, summed in user space. */
struct oc_counters {
  __u64 switches_out; /* switch-outs of the target's threads seen */
  __u64 thinned;      /* ... not sampled under a budget (loupe/thin.bpf.h) */
  /* Below, a sampled event counts as the thinning divisor in force when it was kept (1
   * without a budget), and times are multiplied by it: estimates of the whole. */
  __u64 blocks;          /* ... that ended (switched back in) and were counted */
  __u64 below_min;       /* ... shorter than min_block_ns: not aggregated */
  __u64 blocked_full;    /* the in-flight map refused a switch-out: that block is lost */
  __u64 keys_full;       /* the aggregation map refused a key: time only in lost_ns */
  __u64 lost_ns;         /* off-CPU time not aggregated because a map was full */
  __u64 user_stack_fail; /* bpf_get_stackid failed for a user stack */
  __u64 kernel_stack_fail;
  __u64 wakeups;          /* wake-ups of the target's blocked threads seen */
  __u64 waker_stack_fail; /* a waker's stack could not be taken */
  __u64 runq_waits;       /* run-queue waits measured (wake-up or preemption to run) */
  __u64 runq_procs_full;  /* the per-process run-queue map was full */
  __u64 blockers_full;    /* the blocker map was full */
  /* Switches the tracepoint did not deliver, noticed at the thread's next switch: */
  __u64 missed_ins;    /* a switch-in: its block's time recovered from the CPU time */
  __u64 recovered_ns;  /* ... that time, aggregated under the block's own stacks */
  __u64 missed_outs;   /* a switch-out: the block's stack and reason are unknown */
  __u64 missed_out_ns; /* ... its time off the CPU (tp_btf, raw_tp; 0 with tracepoint) */
  /* Keys handed to user space at their process's exit (loupe/handover.bpf.h), and those
   * left in the map because the handover ring was full (evicted by user space later). */
  __u64 handed_over;
  __u64 handover_full;
  /* New keys not listed for the handover (their process's list held 32, or the lists were
   * full): left in the map for user space's eviction, not lost. */
  __u64 handover_unlisted;
};

/* A key of an exited process and its totals, handed over at the process's last switch:
 * the map no longer holds it (loupe/handover.bpf.h). */
#define OC_REC_HANDOVER 1
#define OC_REC_HANDOVER_VERSION 1

struct oc_handover_rec {
  __u16 type; /* loupe_ring_header */
  __u16 version;
  __u32 len;
  struct oc_key key;
  struct oc_val value;
};

#endif /* LOUPE_OFFCPU_H */
