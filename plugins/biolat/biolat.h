/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * Types shared by biolat.bpf.c and the user-space plugin: fixed-width fields only, no
 * pointers, so both compilers agree on the layout.
 */
#ifndef LOUPE_BIOLAT_H
#define LOUPE_BIOLAT_H

#ifndef __bpf__
#include <linux/types.h>
#endif

#define BIO_COMM_LEN 16
#define BIO_HIST_SLOTS 64 /* log2 (loupe_log2_slot): the last takes (2^61, max] */

#define BIO_RECORD_OUTLIER 1
#define BIO_RECORD_OUTLIER_VERSION 1

/* Operation classes; everything else the block layer sends (zone ops, write zeroes,
 * secure erase, driver ops) is BIO_OP_OTHER. */
enum bio_op {
  BIO_OP_READ = 0,
  BIO_OP_WRITE = 1,
  BIO_OP_FLUSH = 2,
  BIO_OP_DISCARD = 3,
  BIO_OP_OTHER = 4,
  BIO_OP_COUNT = 5,
};

/* Which hook flavour the programs run as (set before load, reported in labels). */
enum bio_mechanism {
  BIO_MECH_TP_BTF = 0,
  BIO_MECH_RAW_TP = 1,
  BIO_MECH_TRACEPOINT = 2,
};

struct bio_hist {
  __u64 count;
  __u64 sum;
  __u64 min; /* 0 = unset (a true 0 keeps it 0, which is right) */
  __u64 max;
  __u64 slots[BIO_HIST_SLOTS];
};

/* One in-flight request. tp_btf/raw_tp key it by its struct request address alone (the
 * map starts: its key is `id`); classic tracepoints expose no pointer, so there it is
 * (dev, sector), in starts_tp. */
struct bio_start_key {
  __u64 id;
  __u32 dev;
  __u32 pad;
};

struct bio_start {
  __u64 insert_ns; /* 0: no insert seen (direct issue, or queued before tracing) */
  __u64 issue_ns;  /* 0: not issued yet */
  __u64 sector;
  __u32 bytes;      /* request size at issue (at insert until then) */
  __u32 done;       /* bytes completed by partial completions so far */
  __u32 dev;        /* kernel dev_t of the disk */
  __u32 classified; /* pattern decided: a requeued request's issue again keeps it */
  __u32 pid;        /* tgid of the task that inserted it, else the one that issued it */
  __u32 tid;
  __u8 op; /* enum bio_op */
  __u8 sync;
  __u8 pattern;   /* BIO_PATTERN_*, decided at issue */
  __u8 untracked; /* another task's or device's request, kept only as a marker (below) */
  char comm[BIO_COMM_LEN];
  __u32 dev_slot;  /* its (dev, op)'s slot in bio_dev_op, decided at issue; NONE: no room */
  __u32 proc_slot; /* its owner's row in procs, decided at insert; NONE: no room */
};

/* Where a request starts relative to where the previous one of the same dev+op ended
 * (decided at issue, in dispatch order). The first request of a dev+op is unknown. */
enum bio_pattern {
  BIO_PATTERN_UNKNOWN = 0,
  BIO_PATTERN_SEQUENTIAL = 1,
  BIO_PATTERN_RANDOM = 2,
};

/*
 * One (dev, op) pair seen by the programs, in the hash dev_ops keyed by bio_stats_key with
 * sync 0: where its last issued request ended (the sequential test) and its slot. Its
 * aggregates are the per-CPU array stats at 2 * slot + sync, so a completion reaches them
 * by index instead of by hashing the key again (slots: loupe/map.bpf.h).
 */
#define BIO_END_UNKNOWN (~0ULL) /* no request issued yet: the next is neither */
struct bio_dev_op {
  __u64 last_end;
  __u32 slot;
  __u32 pad;
};

/* Aggregation key: one device, one operation, sync or not. */
struct bio_stats_key {
  __u32 dev; /* kernel dev_t: major << 20 | minor */
  __u8 op;
  __u8 sync;
  __u16 pad;
};

struct bio_stats {
  struct bio_hist queue;   /* insert -> issue (only requests that were inserted) */
  struct bio_hist service; /* issue -> complete */
  struct bio_hist total;   /* first sight (insert, else issue) -> complete */
  struct bio_hist size;    /* bytes per request */
  __u64 bytes;
  __u64 sequential;
  __u64 random;
  __u64 errors;
  /* I/O merged into a request already queued (a bio that joined one, or a request the
   * scheduler folded into another): no request of its own, as iostat's rrqm/wrqm. */
  __u64 merged;
  __u64 merged_bytes;
};

/* Per-process breakdown: bounded by the map's max_entries, overflow counted. */
struct bio_proc_key {
  __u32 dev;
  __u32 pid;
  __u8 op;
  __u8 pad[3];
  char comm[BIO_COMM_LEN];
};

struct bio_proc {
  __u64 count;
  __u64 bytes;
  __u64 total_ns;
  __u64 max_ns;
  __u64 errors;
  __u64 merged; /* this process's I/O that rode in a request already queued (above) */
  __u64 merged_bytes;
};

/* Per-CPU health counters, summed in user space. */
struct bio_counters {
  __u64 completed;       /* completions matched to a tracked request (every device) */
  __u64 unmatched;       /* completions with no start: in flight when tracing began */
  __u64 issue_no_insert; /* issued without an insert (direct issue): no queue time */
  __u64 requeued;        /* issued twice (requeue): the service clock restarts */
  __u64 partial;         /* completions of part of a request (it stays in flight) */
  __u64 map_full;        /* the in-flight map refused an insert */
  __u64 below_min;       /* shorter than min_latency_ns: not recorded */
  __u64 filtered;        /* completions of requests the pid/comm/cgroup/device filters left out */
  __u64 outliers;        /* latency >= outlier_ns, sent to the ring */
  __u64 outliers_sampled_out;
  __u64 proc_overflow; /* per-process map full: counted in the device total only */
  __u64 stats_full;    /* the (dev, op, sync) map was full: not in the device totals */
  __u64 pattern_full;  /* the (dev, op) last-end map was full: pattern not judged */
  __u64 merged;        /* traced I/O merged into a request already queued (bio or request) */
};

/* Ring record for one slow request; starts with the loupe ring header. */
struct bio_outlier_event {
  __u16 type;
  __u16 version;
  __u32 len;
  __u64 boot_ns; /* bpf_ktime_get_boot_ns() at completion */
  __u64 sector;
  __u64 queue_ns;
  __u64 service_ns;
  __u64 total_ns;
  __u32 dev;
  __u32 bytes;
  __u32 pid;
  __u32 tid;
  __s32 error;
  __u8 op;
  __u8 sync;
  __u8 pad[2];
  char comm[BIO_COMM_LEN];
};

#endif /* LOUPE_BIOLAT_H */
