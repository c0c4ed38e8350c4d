/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * Types shared by cpusample.bpf.c and the user-space plugin: fixed-width fields only.
 */
#ifndef LOUPE_CPUSAMPLE_H
#define LOUPE_CPUSAMPLE_H

#ifndef __bpf__
#include <linux/types.h>
#endif

#include "loupe/ustack.h"

/* perf's default (kernel.perf_event_max_stack is 127). */
#define CS_MAX_STACK_DEPTH 127
#define CS_COMM_LEN 16

/* One in-kernel aggregation slot: samples are counted per key, never sent one by one. */
struct cs_key {
  __u32 tgid;
  __u32 pid;           /* the thread; 0 unless per_thread */
  __s32 user_stack_id; /* < 0: none (kernel thread, disabled, or failed: see counters) */
  __s32 kernel_stack_id;
  char comm[CS_COMM_LEN];
};

/* Per-CPU counters, summed in user space. */
struct cs_counters {
  /* Samples that passed the filters and were counted, each as the thinning divisor in
   * force when it was kept (1 without a budget): an estimate of the whole under one. */
  __u64 samples;
  __u64 thinned;       /* samples that passed the filters but thinning skipped */
  __u64 idle;          /* samples of the idle task, skipped unless include_idle */
  __u64 filtered;      /* samples of other tasks, skipped by the pid/tid/cgroup filter */
  __u64 user_efault;   /* user stack of a user task could not be read */
  __u64 user_eexist;   /* user stack hash collision: stack map full or colliding */
  __u64 user_other;    /* any other bpf_get_stackid error */
  __u64 kernel_efault; /* kernel-mode sample without a kernel stack */
  __u64 kernel_eexist;
  __u64 kernel_other;
  __u64 counts_full; /* the aggregation map refused a new key: sample lost */
  __u64 dwarf_sent;  /* unwind = "dwarf": records handed to the ring (losses: its _lost map) */
  /* Keys handed to user space at their process's exit (loupe/handover.bpf.h), and those
   * left in the map because the handover ring was full (evicted by user space later). */
  __u64 handed_over;
  __u64 handover_full;
  /* New keys not listed for the handover (their process's list held 32, or the lists were
   * full): left in the map for user space's eviction, not lost. */
  __u64 handover_unlisted;
};

/* unwind = "dwarf": one ring record per sample, unwound in user space. */
#define CS_REC_DWARF 1
#define CS_REC_DWARF_VERSION 1

struct cs_dwarf_rec {
  __u16 type; /* loupe_ring_header */
  __u16 version;
  __u32 len; /* sizeof(struct cs_dwarf_rec) + us.stack_len */
  __u32 tgid;
  __u32 pid;
  __s32 kernel_stack_id; /* < 0: none (user-mode sample, disabled, or failed: counters) */
  __u16 has_user;        /* 0: no user stack (kernel thread, disabled, or no registers) */
  __u16 weight;          /* the samples it stands for (thinning); 0 in a version-1 recording: 1 */
  char comm[CS_COMM_LEN];
  struct loupe_ustack us; /* last: us.stack_len bytes of stack follow */
};

/* A key of an exited process and its total, handed over as the process exited: the map no
 * longer holds it (loupe/handover.bpf.h). */
#define CS_REC_HANDOVER 2
#define CS_REC_HANDOVER_VERSION 1

struct cs_handover_rec {
  __u16 type; /* loupe_ring_header */
  __u16 version;
  __u32 len;
  struct cs_key key;
  __u64 value;
};

#endif /* LOUPE_CPUSAMPLE_H */
