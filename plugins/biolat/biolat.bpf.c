// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * Block request lifecycle: insert -> issue -> complete, keyed by request. Three flavours
 * of the same three hooks; user space keeps one set (bpf_program__set_autoload) after
 * probing: tp_btf, else raw_tp, else classic tracepoints.
 */
#include "vmlinux.h"
#include <bpf/bpf_core_read.h>
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>

#include "loupe/emit.bpf.h"
#include "loupe/filter.bpf.h"
#include "loupe/hist.bpf.h"
#include "loupe/map.bpf.h"
#include "biolat.h"

#define REQ_OP_MASK 0xff /* REQ_OP_BITS = 8 since v4.10 (ef295ecf090d) */
#define REQ_OP_READ_ 0
#define REQ_OP_WRITE_ 1
#define REQ_OP_FLUSH_ 2
#define REQ_OP_DISCARD_ 3
#define MINORBITS 20

const volatile __u32 targ_dev = 0; /* kernel dev_t (major << 20 | minor); 0 = every device */
const volatile __u64 targ_min_ns = 0;
const volatile __u64 targ_outlier_ns = 0; /* 0 = no outlier events */
const volatile bool targ_per_process = true;
/*
 * block_rq_insert/issue lost their request_queue argument in v5.11 (a54895fa057c,
 * "block: remove the request_queue to argument request based tracepoints"): user space
 * reads the prototype from BTF and says which argument is the request.
 */
const volatile bool targ_rq_single_arg = true;
/* block_bio_backmerge/frontmerge lost (q, rq) before their bio in the same release
 * (e8a676d61c07): the bio is argument 0, else 2 (user space reads it from BTF). */
const volatile __u32 targ_bio_arg = 0;
/* Slots (loupe/map.bpf.h): max_device_ops (dev, op) pairs and process_limit process rows;
 * user space sets both with the maps' max_entries. */
const volatile __u32 targ_device_ops = 512;
const volatile __u32 targ_process_limit = 256;
__u32 dev_slot_hint;
__u32 proc_slot_hint;

/*
 * struct request lost rq_disk in v5.17 (f3fa33acca9f, "block: remove the ->rq_disk field
 * in struct request"); the disk is rq->q->disk since v5.16 (d152c682f03c, "block: add an
 * explicit ->disk backpointer to the request_queue"). Both flavours, chosen by CO-RE.
 */
struct request_queue___x {
	struct gendisk *disk;
} __attribute__((preserve_access_index));

struct request___x {
	struct request_queue___x *q;
	struct gendisk *rq_disk;
} __attribute__((preserve_access_index));

/*
 * Requests in flight. tp_btf and raw_tp key them by their address alone: an 8-byte key
 * hashes and compares in less time at each of a request's three hooks than the classic
 * tracepoints' (dev, sector) pair, which keeps a map of its own. User space sizes the one
 * in use and leaves the other at one entry.
 */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 10240);
	__type(key, __u64); /* bio_start_key.id */
	__type(value, struct bio_start);
} starts SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 10240);
	__type(key, struct bio_start_key);
	__type(value, struct bio_start);
} starts_tp SEC(".maps");

/* `tp`: the classic tracepoints' map. A constant at every call, so each program names one. */
#define STARTS(tp) ((tp) ? (void *)&starts_tp : (void *)&starts)

/* Each (dev, op) pair: its last end and its slot (struct bio_dev_op). max_device_ops
 * entries here and in dev_slots_taken, twice that in stats (user space sets them). */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 512);
	__type(key, struct bio_stats_key);
	__type(value, struct bio_dev_op);
} dev_ops SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 512);
	__type(key, __u32);
	__type(value, __u8);
} dev_slots_taken SEC(".maps");

/* The (dev, op, sync) aggregates, at 2 * slot + sync. */
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1024);
	__type(key, __u32);
	__type(value, struct bio_stats);
} stats SEC(".maps");

/* Process rows by slot, and each row's key: process_limit entries in all three. */
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 256);
	__type(key, __u32);
	__type(value, struct bio_proc);
} procs SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 256);
	__type(key, struct bio_proc_key);
	__type(value, __u32);
} proc_slots SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 256);
	__type(key, __u32);
	__type(value, __u8);
} proc_slots_taken SEC(".maps");

/*
 * The last submitter seen on this CPU and its rows by op: a process doing I/O in a loop
 * finds its row here, where a lookup of proc_slots would hash its 28-byte key at every
 * request. `seq` is odd while the entry is rewritten: a program preempted on this CPU
 * in the middle leaves it odd, and the next reader takes the hash instead of half an entry.
 */
struct proc_cache {
	__u32 seq;
	__u32 pid;
	__u32 dev;
	__u32 slot[8]; /* by op_index() */
	char comm[BIO_COMM_LEN];
};

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct proc_cache);
} proc_cache SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct bio_counters);
} counters SEC(".maps");

/*
 * A partition's dev_t -> its disk's, filled by user space at start (max_entries: the
 * partitions it found). Only the classic bio tracepoints need it: they name the bio's
 * partition, and requests (and so the aggregates) belong to the disk.
 */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, __u32);
} disk_of SEC(".maps");

LOUPE_RING(outliers, 256 * 1024);

static __always_inline struct bio_counters *get_counters(void)
{
	__u32 zero = 0;

	return bpf_map_lookup_elem(&counters, &zero);
}

/* The (dev, op) pair's entry, with a slot claimed when it is new; NULL when none is left. */
static __always_inline struct bio_dev_op *dev_op_of(__u32 dev, __u8 op)
{
	struct bio_stats_key k = {.dev = dev, .op = op};
	struct bio_dev_op init = {.last_end = BIO_END_UNKNOWN};

	return loupe_slot_entry(&dev_ops, &dev_slots_taken, &dev_slot_hint, targ_device_ops, &k,
				&init, &init.slot);
}

/* The (dev, op, sync) aggregate in its slot; NULL when the pair has none. */
static __always_inline struct bio_stats *stats_at(__u32 dev_slot, __u8 sync)
{
	__u32 i = dev_slot * 2 + (sync ? 1 : 0);

	return dev_slot == LOUPE_SLOT_NONE ? NULL : bpf_map_lookup_elem(&stats, &i);
}

/* The process row's slot of (dev, pid, op, comm): LOUPE_SLOT_NONE when no row is left. */
static __always_inline __u32 proc_slot_of(__u32 dev, __u32 pid, __u8 op, const char *comm)
{
	struct bio_proc_key k = {.dev = dev, .pid = pid, .op = op};

	__builtin_memcpy(k.comm, comm, sizeof(k.comm));
	return loupe_slot_of(&proc_slots, &proc_slots_taken, &proc_slot_hint, targ_process_limit,
			     &k);
}

/* Ordered against the entry's other loads and stores by the compiler barrier: only a
 * program on this CPU reads or writes it, so no CPU barrier is needed. */
#define READ_SEQ(pc)                                                                               \
	({                                                                                         \
		asm volatile("" ::: "memory");                                                     \
		*(volatile __u32 *)&(pc)->seq;                                                     \
	})
#define WRITE_SEQ(pc, v)                                                                           \
	do {                                                                                       \
		asm volatile("" ::: "memory");                                                     \
		*(volatile __u32 *)&(pc)->seq = (v);                                               \
		asm volatile("" ::: "memory");                                                     \
	} while (0)

/* op & 7, kept: the compiler knows op < 5 and would drop a mask the verifier needs. */
static __always_inline __u32 op_index(__u8 op)
{
	__u32 i = op;

	asm volatile("" : "+r"(i));
	return i & 7;
}

/* The same through this CPU's cache of its last submitter (struct proc_cache). */
static __always_inline __u32 proc_slot_cached(__u32 dev, __u32 pid, __u8 op, const char *comm)
{
	__u32 zero = 0, seq, slot, *w = (__u32 *)comm, *cw;
	struct proc_cache *pc = bpf_map_lookup_elem(&proc_cache, &zero);

	if (!pc)
		return proc_slot_of(dev, pid, op, comm);
	cw = (__u32 *)pc->comm;
	seq = READ_SEQ(pc);
	/* 0: never written (a zeroed entry would name slot 0 for pid 0). */
	if (seq && !(seq & 1) && pc->pid == pid && pc->dev == dev && cw[0] == w[0] &&
	    cw[1] == w[1] && cw[2] == w[2] && cw[3] == w[3]) {
		slot = pc->slot[op_index(op)];
		if (slot != LOUPE_SLOT_NONE && READ_SEQ(pc) == seq)
			return slot;
	}
	slot = proc_slot_of(dev, pid, op, comm);
	if (slot == LOUPE_SLOT_NONE)
		return slot;
	WRITE_SEQ(pc, seq | 1);
	if (pc->pid != pid || pc->dev != dev || cw[0] != w[0] || cw[1] != w[1] || cw[2] != w[2] ||
	    cw[3] != w[3]) {
		int i;

		pc->pid = pid;
		pc->dev = dev;
		__builtin_memcpy(pc->comm, comm, sizeof(pc->comm));
#pragma unroll
		for (i = 0; i < 8; i++)
			pc->slot[i] = LOUPE_SLOT_NONE;
	}
	pc->slot[op_index(op)] = slot;
	WRITE_SEQ(pc, (seq | 1) + 1);
	return slot;
}

static __always_inline void hist_add(struct bio_hist *h, __u64 v)
{
	__u32 slot = loupe_log2_slot(v);

	LOUPE_HIST_RECORD(h, v, slot, BIO_HIST_SLOTS);
}

static __always_inline __u8 op_class(__u32 op)
{
	switch (op) {
	case REQ_OP_READ_:
		return BIO_OP_READ;
	case REQ_OP_WRITE_:
		return BIO_OP_WRITE;
	case REQ_OP_FLUSH_:
		return BIO_OP_FLUSH;
	case REQ_OP_DISCARD_:
		return BIO_OP_DISCARD;
	}
	return BIO_OP_OTHER;
}

/* What the request carries, from wherever the flavour reads it. */
struct rq_info {
	struct bio_start_key key;
	__u32 dev;
	__u64 sector;
	__u32 bytes;
	__u8 op;
	__u8 sync;
};

/*
 * `btf`: the request came from a tp_btf program, where it is a trusted BTF pointer and
 * plain (CO-RE relocated) loads are allowed and cheap; raw_tp hands over a bare number,
 * so every field there is a bpf_probe_read_kernel() (~20 ns each, seven per request).
 * Callers pass a constant, so each program keeps only its own branch.
 */
#define RQ_LOAD(btf, ptr, field) ((btf) ? (ptr)->field : BPF_CORE_READ(ptr, field))

static __always_inline __u32 rq_dev(struct request *rq, bool btf)
{
	struct request___x *r = (void *)rq;
	struct gendisk *disk;

	if (bpf_core_field_exists(r->rq_disk))
		disk = RQ_LOAD(btf, r, rq_disk);
	else
		disk = btf ? r->q->disk : BPF_CORE_READ(r, q, disk);
	if (!disk)
		return 0;
	return (RQ_LOAD(btf, disk, major) << MINORBITS) | RQ_LOAD(btf, disk, first_minor);
}

static __always_inline void rq_read(struct request *rq, struct rq_info *ri, bool btf)
{
	__u32 flags = RQ_LOAD(btf, rq, cmd_flags);

	ri->key.id = (__u64)rq;
	ri->dev = rq_dev(rq, btf);
	ri->sector = RQ_LOAD(btf, rq, __sector);
	ri->bytes = RQ_LOAD(btf, rq, __data_len);
	ri->op = op_class(flags & REQ_OP_MASK);
	/* The bit moved as flags were added below it: relocate it from the kernel's enum. */
	ri->sync = !!(flags & (1U << bpf_core_enum_value(enum req_flag_bits, __REQ_SYNC)));
}

/* Classic tracepoints give rwbs (blk_fill_rwbs): [F]{W,R,D,F,N,...}[F][A][S][M]. */
static __always_inline void rwbs_read(const char *rwbs, struct rq_info *ri)
{
	char c0 = rwbs[0], c1 = rwbs[1];
	char op = c0;
	int i;

	/* A leading F is REQ_PREFLUSH when another operation letter follows. */
	if (c0 == 'F' && (c1 == 'W' || c1 == 'R' || c1 == 'D' || c1 == 'F' || c1 == 'N'))
		op = c1;
	ri->op = op == 'R'   ? BIO_OP_READ
		 : op == 'W' ? BIO_OP_WRITE
		 : op == 'F' ? BIO_OP_FLUSH
		 : op == 'D' ? BIO_OP_DISCARD
			     : BIO_OP_OTHER;
	ri->sync = 0;
#pragma unroll
	for (i = 1; i < 8; i++) {
		if (rwbs[i] == 0)
			break;
		if (rwbs[i] == 'S')
			ri->sync = 1;
	}
}

/* Where the request starts beside its (dev, op)'s last end; its pair's slot in `slot`. */
static __always_inline __u8 pattern_of(struct rq_info *ri, struct bio_counters *c, __u32 *slot)
{
	struct bio_dev_op *d = dev_op_of(ri->dev, ri->op);
	__u8 p;

	if (!d) {
		c->pattern_full++;
		*slot = LOUPE_SLOT_NONE;
		return BIO_PATTERN_UNKNOWN;
	}
	*slot = d->slot;
	p = d->last_end == BIO_END_UNKNOWN ? BIO_PATTERN_UNKNOWN
	    : d->last_end == ri->sector	   ? BIO_PATTERN_SEQUENTIAL
					   : BIO_PATTERN_RANDOM;
	d->last_end = ri->sector + (ri->bytes >> 9);
	return p;
}

/* The owner: the current task, and its process row when per-process rows are on. */
static __always_inline void fill_task(struct bio_start *s, __u64 pid_tgid, bool btf)
{
	s->pid = pid_tgid >> 32;
	s->tid = (__u32)pid_tgid;
	if (btf) {
		/* A trusted pointer: the name is two plain loads, not a helper's copy. */
		struct task_struct *t = bpf_get_current_task_btf();
		__u32 *src = (__u32 *)t->comm, *dst = (__u32 *)s->comm;

		dst[0] = src[0];
		dst[1] = src[1];
		dst[2] = src[2];
		dst[3] = src[3];
	} else {
		bpf_get_current_comm(s->comm, sizeof(s->comm));
	}
	s->proc_slot =
	    targ_per_process ? proc_slot_cached(s->dev, s->pid, s->op, s->comm) : LOUPE_SLOT_NONE;
}

/* The current task's ids: from its trusted pointer by plain loads where there is one. */
static __always_inline __u64 current_pid_tgid(bool btf)
{
	struct task_struct *t;

	if (!btf)
		return bpf_get_current_pid_tgid();
	t = bpf_get_current_task_btf();
	return ((__u64)t->tgid << 32) | (__u32)t->pid;
}

static __always_inline int on_insert(struct rq_info *ri, bool btf, bool tp)
{
	__u64 pid_tgid = current_pid_tgid(btf);
	struct bio_counters *c;
	struct bio_start s = {}, *old;

	if ((targ_dev && ri->dev != targ_dev) || !loupe_filter_pass(pid_tgid)) {
		/* Under a filter, another task's request is remembered as a marker: when the
		 * traced task later runs the hardware queue it issues queued requests of other
		 * tasks in its own context, and without the marker each would look like its
		 * own direct issue. NOEXIST: a traced request re-inserted by a kworker after a
		 * requeue keeps its entry. */
		if (targ_dev || loupe_filter_tgid || loupe_filter_tid || loupe_filter_cgroup ||
		    loupe_filter_comm_on) {
			s.untracked = 1;
			s.bytes = ri->bytes;
			/* -EEXIST: the traced request's own entry stays, as meant. */
			if (bpf_map_update_elem(STARTS(tp), &ri->key, &s, BPF_NOEXIST) &&
			    !bpf_map_lookup_elem(STARTS(tp), &ri->key) && (c = get_counters()))
				c->map_full++;
		}
		return 0;
	}
	s.insert_ns = bpf_ktime_get_ns();
	s.dev_slot = LOUPE_SLOT_NONE; /* decided at its issue */
	s.sector = ri->sector;
	s.bytes = ri->bytes;
	s.dev = ri->dev;
	s.op = ri->op;
	s.sync = ri->sync;
	fill_task(&s, pid_tgid, btf);
	/* A new request is the common case: one insert, no lookup first, and the counters
	 * only when there is something to count. */
	if (!bpf_map_update_elem(STARTS(tp), &ri->key, &s, BPF_NOEXIST))
		return 0;
	c = get_counters();
	if (!c)
		return 0;
	old = bpf_map_lookup_elem(STARTS(tp), &ri->key);
	if (!old) {
		c->map_full++;
		return 0;
	}
	if (old->issue_ns) {
		c->requeued++; /* re-inserted after a requeue: times restart */
		/* Its place in the dispatch order was counted at its first issue. */
		s.pattern = old->pattern;
		s.classified = old->classified;
		s.dev_slot = old->dev_slot;
	}
	*old = s;
	return 0;
}

/* `rq` non-NULL: ri holds only the key and the rest is read from rq when needed. */
static __always_inline int on_issue(struct rq_info *ri, struct request *rq, bool btf, bool tp)
{
	struct bio_counters *c = get_counters();
	struct bio_start *s;
	__u64 pid_tgid;

	if (!c)
		return 0;
	s = bpf_map_lookup_elem(STARTS(tp), &ri->key);
	if (s && s->untracked) {
		if (rq) /* merges grow it: its completion is whole only at this size */
			s->bytes = RQ_LOAD(btf, rq, __data_len);
		return 0;
	}
	if (s) {
		if (rq) {
			/* Only what can change since insert: merges grow the request. */
			ri->sector = RQ_LOAD(btf, rq, __sector);
			ri->bytes = RQ_LOAD(btf, rq, __data_len);
		}
		ri->dev = s->dev;
		ri->op = s->op;
		/* Issue runs in whatever context dispatches (often kblockd): the task that
		 * inserted the request stays its owner. */
		if (s->issue_ns)
			c->requeued++;
		s->issue_ns = bpf_ktime_get_ns();
		s->sector = ri->sector;
		s->bytes = ri->bytes;
		s->done = 0;
		/* Once a request: under a busy device the driver refuses a request
		 * (BLK_STS_RESOURCE) and it is issued again, its sector unchanged. */
		if (!s->classified) {
			s->pattern = pattern_of(ri, c, &s->dev_slot);
			s->classified = 1;
		}
		return 0;
	}
	/* Direct issue (no scheduler queueing): the submitter issues in its own context. */
	if (rq)
		rq_read(rq, ri, btf);
	if (targ_dev && ri->dev != targ_dev)
		return 0;
	pid_tgid = bpf_get_current_pid_tgid();
	if (!loupe_filter_pass(pid_tgid))
		return 0;
	{
		struct bio_start init = {};

		init.issue_ns = bpf_ktime_get_ns();
		init.sector = ri->sector;
		init.bytes = ri->bytes;
		init.dev = ri->dev;
		init.op = ri->op;
		init.sync = ri->sync;
		init.pattern = pattern_of(ri, c, &init.dev_slot);
		init.classified = 1;
		fill_task(&init, pid_tgid, btf);
		c->issue_no_insert++;
		if (bpf_map_update_elem(STARTS(tp), &ri->key, &init, BPF_ANY))
			c->map_full++;
	}
	return 0;
}

static __always_inline void record_proc(struct bio_start *s, __u64 total, int error,
					struct bio_counters *c)
{
	struct bio_proc *p = bpf_map_lookup_elem(&procs, &s->proc_slot);

	if (!p) {
		c->proc_overflow++;
		return;
	}
	p->count++;
	p->bytes += s->bytes;
	p->total_ns += total;
	if (total > p->max_ns)
		p->max_ns = total;
	if (error)
		p->errors++;
}

static __always_inline void emit_outlier(struct bio_start *s, __u32 dev, __u64 queue, __u64 service,
					 __u64 total, int error, struct bio_counters *c)
{
	struct bio_outlier_event *e;

	if (loupe_sampled_out(&outliers_divisor)) {
		c->outliers_sampled_out++;
		return;
	}
	e = LOUPE_RESERVE(outliers, struct bio_outlier_event, BIO_RECORD_OUTLIER,
			  BIO_RECORD_OUTLIER_VERSION);
	if (!e)
		return; /* counted in outliers_lost */
	e->boot_ns = bpf_ktime_get_boot_ns();
	e->sector = s->sector;
	e->queue_ns = queue;
	e->service_ns = service;
	e->total_ns = total;
	e->dev = dev;
	e->bytes = s->bytes;
	e->pid = s->pid;
	e->tid = s->tid;
	e->error = error;
	e->op = s->op;
	e->sync = s->sync;
	e->pad[0] = 0;
	e->pad[1] = 0;
	__builtin_memcpy(e->comm, s->comm, sizeof(e->comm));
	LOUPE_SUBMIT(outliers, e);
	c->outliers++;
}

/*
 * I/O that joined a request already queued: a bio merged into one (in its submitter's
 * context), or a request the scheduler folded into a neighbour (at its insert, or later).
 * It is never issued or completed on its own, so without this count it would vanish from
 * its owner's figures; its bytes and time are the other request's, whoever owns that.
 * These are the merges iostat's rrqm/wrqm count (/proc/diskstats).
 */
static __always_inline void count_merged(struct rq_info *ri, __u32 dev_slot, __u32 proc_slot,
					 struct bio_counters *c)
{
	struct bio_stats *st = stats_at(dev_slot, ri->sync);

	c->merged++;
	if (st) {
		st->merged++;
		st->merged_bytes += ri->bytes;
	} else {
		c->stats_full++;
	}
	if (targ_per_process) {
		struct bio_proc *p = bpf_map_lookup_elem(&procs, &proc_slot);

		if (!p) {
			c->proc_overflow++;
			return;
		}
		p->merged++;
		p->merged_bytes += ri->bytes;
	}
}

static __always_inline __u32 dev_slot_of(__u32 dev, __u8 op)
{
	struct bio_dev_op *d = dev_op_of(dev, op);

	return d ? d->slot : LOUPE_SLOT_NONE;
}

/* The current task's I/O, when the filters keep it. */
static __always_inline void count_merged_current(struct rq_info *ri, struct bio_counters *c)
{
	__u64 pid_tgid = bpf_get_current_pid_tgid();
	char comm[BIO_COMM_LEN];
	__u32 proc_slot = LOUPE_SLOT_NONE;

	if ((targ_dev && ri->dev != targ_dev) || !loupe_filter_pass(pid_tgid))
		return;
	if (targ_per_process) {
		bpf_get_current_comm(comm, sizeof(comm));
		proc_slot = proc_slot_of(ri->dev, pid_tgid >> 32, ri->op, comm);
	}
	count_merged(ri, dev_slot_of(ri->dev, ri->op), proc_slot, c);
}

/* `rq` non-NULL: ri holds only the key, and the rest is read from rq when needed. */
static __always_inline int on_rq_merge(struct rq_info *ri, struct request *rq, bool btf, bool tp)
{
	struct bio_counters *c = get_counters();
	struct bio_start *s;

	if (!c)
		return 0;
	s = bpf_map_lookup_elem(STARTS(tp), &ri->key);
	if (s) {
		/* Inserted earlier, folded into a neighbour now: freed without completing. */
		if (!s->untracked) {
			ri->dev = s->dev;
			ri->op = s->op;
			ri->sync = s->sync;
			ri->bytes = s->bytes;
			/* Its slots are the entry's: no key is hashed again. The (dev, op)
			 * slot is decided at issue, so one merged before it has none yet. */
			count_merged(ri,
				     s->dev_slot != LOUPE_SLOT_NONE ? s->dev_slot
								    : dev_slot_of(ri->dev, ri->op),
				     s->proc_slot, c);
		}
		bpf_map_delete_elem(STARTS(tp), &ri->key);
		return 0;
	}
	/* Folded in at its insert (the scheduler's insert merge), so never inserted itself:
	 * the task inserting it is its owner. */
	if (rq)
		rq_read(rq, ri, btf);
	count_merged_current(ri, c);
	return 0;
}

static __always_inline int on_bio_merge(struct rq_info *ri)
{
	struct bio_counters *c = get_counters();

	if (c)
		count_merged_current(ri, c);
	return 0;
}

/* `done_bytes` < 0: the flavour cannot tell partial completions apart. */
static __always_inline int on_complete(struct bio_start_key *key, int error, __s64 done_bytes,
				       bool tp)
{
	struct bio_counters *c = get_counters();
	struct bio_start *sp, s;
	struct bio_stats *st;
	__u64 now, first, queue = 0, service, total;

	if (!c)
		return 0;
	sp = bpf_map_lookup_elem(STARTS(tp), key);
	if (sp && sp->untracked) {
		if (done_bytes >= 0 && (__u64)sp->done + done_bytes < sp->bytes) {
			sp->done += done_bytes;
			return 0;
		}
		bpf_map_delete_elem(STARTS(tp), key);
		c->filtered++;
		return 0;
	}
	if (!sp || !sp->issue_ns) {
		c->unmatched++;
		return 0;
	}
	if (done_bytes >= 0 && (__u64)sp->done + done_bytes < sp->bytes) {
		/* blk_update_request() finished part of it; the rest completes later. */
		sp->done += done_bytes;
		c->partial++;
		return 0;
	}
	now = bpf_ktime_get_ns();
	s = *sp;
	bpf_map_delete_elem(STARTS(tp), key);
	c->completed++;

	first = s.insert_ns ? s.insert_ns : s.issue_ns;
	total = now - first;
	service = now - s.issue_ns;
	if (s.insert_ns)
		queue = s.issue_ns - s.insert_ns;
	if (total < targ_min_ns) {
		c->below_min++;
		return 0;
	}
	st = stats_at(s.dev_slot, s.sync);
	if (!st) {
		/* Only the device totals lose it: the process row and the event still come. */
		c->stats_full++;
	} else {
		if (s.insert_ns)
			hist_add(&st->queue, queue);
		hist_add(&st->service, service);
		hist_add(&st->total, total);
		hist_add(&st->size, s.bytes);
		st->bytes += s.bytes;
		if (s.pattern == BIO_PATTERN_SEQUENTIAL)
			st->sequential++;
		else if (s.pattern == BIO_PATTERN_RANDOM)
			st->random++;
		if (error)
			st->errors++;
	}
	if (targ_per_process)
		record_proc(&s, total, error, c);
	if (targ_outlier_ns && total >= targ_outlier_ns)
		emit_outlier(&s, s.dev, queue, service, total, error, c);
	return 0;
}

static __always_inline struct request *rq_arg(unsigned long long *args)
{
	/* The untaken branch is pruned at load: the flag is read-only data. */
	if (targ_rq_single_arg)
		return (struct request *)args[0];
	return (struct request *)args[1];
}

static __always_inline int rq_insert(struct request *rq, bool btf)
{
	struct rq_info ri = {};

	rq_read(rq, &ri, btf);
	return on_insert(&ri, btf, false);
}

static __always_inline int rq_issue(struct request *rq, bool btf)
{
	struct rq_info ri = {};

	ri.key.id = (__u64)rq;
	return on_issue(&ri, rq, btf, false);
}

static __always_inline int rq_complete(struct request *rq, int error, __u32 nr_bytes)
{
	struct bio_start_key key = {.id = (__u64)rq};

	return on_complete(&key, error, nr_bytes, false);
}

static __always_inline struct bio *bio_arg(unsigned long long *args)
{
	if (targ_bio_arg == 0)
		return (struct bio *)args[0];
	return (struct bio *)args[2];
}

static __always_inline int bio_merge(struct bio *bio, bool btf)
{
	struct rq_info ri = {};
	struct gendisk *disk = btf ? bio->bi_bdev->bd_disk : BPF_CORE_READ(bio, bi_bdev, bd_disk);
	__u32 opf = RQ_LOAD(btf, bio, bi_opf);

	/* The disk, not the bio's partition: requests and aggregates are per disk. */
	if (disk)
		ri.dev = (RQ_LOAD(btf, disk, major) << MINORBITS) | RQ_LOAD(btf, disk, first_minor);
	ri.bytes = btf ? bio->bi_iter.bi_size : BPF_CORE_READ(bio, bi_iter.bi_size);
	ri.op = op_class(opf & REQ_OP_MASK);
	ri.sync = !!(opf & (1U << bpf_core_enum_value(enum req_flag_bits, __REQ_SYNC)));
	return on_bio_merge(&ri);
}

static __always_inline int rq_merge(struct request *rq, bool btf)
{
	struct rq_info ri = {};

	ri.key.id = (__u64)rq;
	return on_rq_merge(&ri, rq, btf, false);
}

SEC("tp_btf/block_rq_insert")
int bio_btf_insert(unsigned long long *ctx)
{
	return rq_insert(rq_arg(ctx), true);
}

SEC("tp_btf/block_rq_issue")
int bio_btf_issue(unsigned long long *ctx)
{
	return rq_issue(rq_arg(ctx), true);
}

/* TP_PROTO(struct request *rq, blk_status_t error, unsigned int nr_bytes) */
SEC("tp_btf/block_rq_complete")
int bio_btf_complete(unsigned long long *ctx)
{
	return rq_complete((struct request *)ctx[0], (__u8)ctx[1], (__u32)ctx[2]);
}

/* TP_PROTO(struct request *rq): the request folded into another, about to be freed. */
SEC("tp_btf/block_rq_merge")
int bio_btf_rq_merge(unsigned long long *ctx)
{
	return rq_merge(rq_arg(ctx), true);
}

SEC("tp_btf/block_bio_backmerge")
int bio_btf_backmerge(unsigned long long *ctx)
{
	return bio_merge(bio_arg(ctx), true);
}

SEC("tp_btf/block_bio_frontmerge")
int bio_btf_frontmerge(unsigned long long *ctx)
{
	return bio_merge(bio_arg(ctx), true);
}

SEC("raw_tp/block_rq_insert")
int bio_raw_insert(struct bpf_raw_tracepoint_args *ctx)
{
	return rq_insert(rq_arg(ctx->args), false);
}

SEC("raw_tp/block_rq_issue")
int bio_raw_issue(struct bpf_raw_tracepoint_args *ctx)
{
	return rq_issue(rq_arg(ctx->args), false);
}

SEC("raw_tp/block_rq_complete")
int bio_raw_complete(struct bpf_raw_tracepoint_args *ctx)
{
	return rq_complete((struct request *)ctx->args[0], (__u8)ctx->args[1], (__u32)ctx->args[2]);
}

SEC("raw_tp/block_rq_merge")
int bio_raw_rq_merge(struct bpf_raw_tracepoint_args *ctx)
{
	return rq_merge(rq_arg(ctx->args), false);
}

SEC("raw_tp/block_bio_backmerge")
int bio_raw_backmerge(struct bpf_raw_tracepoint_args *ctx)
{
	return bio_merge(bio_arg(ctx->args), false);
}

SEC("raw_tp/block_bio_frontmerge")
int bio_raw_frontmerge(struct bpf_raw_tracepoint_args *ctx)
{
	return bio_merge(bio_arg(ctx->args), false);
}

/*
 * Classic tracepoints carry no request pointer: requests are keyed by (dev, sector), and
 * a partial completion moves the sector, so there the first completion closes a request.
 */
static __always_inline void tp_read(struct trace_event_raw_block_rq *ctx, struct rq_info *ri)
{
	char rwbs[8];

	bpf_probe_read_kernel(rwbs, sizeof(rwbs), ctx->rwbs);
	ri->key.id = ctx->sector;
	ri->key.dev = ctx->dev;
	ri->dev = ctx->dev;
	ri->sector = ctx->sector;
	ri->bytes = ctx->bytes;
	rwbs_read(rwbs, ri);
}

SEC("tracepoint/block/block_rq_insert")
int bio_tp_insert(struct trace_event_raw_block_rq *ctx)
{
	struct rq_info ri = {};

	tp_read(ctx, &ri);
	return on_insert(&ri, false, true);
}

SEC("tracepoint/block/block_rq_issue")
int bio_tp_issue(struct trace_event_raw_block_rq *ctx)
{
	struct rq_info ri = {};

	tp_read(ctx, &ri);
	return on_issue(&ri, NULL, false, true);
}

SEC("tracepoint/block/block_rq_complete")
int bio_tp_complete(struct trace_event_raw_block_rq_completion *ctx)
{
	struct bio_start_key key = {.id = ctx->sector, .dev = ctx->dev};

	return on_complete(&key, ctx->error, -1, true);
}

SEC("tracepoint/block/block_rq_merge")
int bio_tp_rq_merge(struct trace_event_raw_block_rq *ctx)
{
	struct rq_info ri = {};

	tp_read(ctx, &ri);
	return on_rq_merge(&ri, NULL, false, true);
}

/*
 * Here a request is keyed by where it starts, and a bio that joins its front moves that:
 * the entry follows, or its issue and completion would find none (in a guest's test of
 * four processes writing neighbouring blocks, 22 of 161 requests went missing so).
 */
static __always_inline void tp_follow_front(__u32 dev, __u64 sector, __u32 bytes,
					    struct bio_counters *c)
{
	const bool tp = true;

	struct bio_start_key was = {.id = sector + (bytes >> 9), .dev = dev};
	struct bio_start_key now = {.id = sector, .dev = dev};
	struct bio_start *s = bpf_map_lookup_elem(STARTS(tp), &was), moved;

	if (!s)
		return;
	/* Its bytes grow too; the bio's are counted as merged, and the request's are read again
	 * at its issue. */
	moved = *s;
	moved.sector = sector;
	if (bpf_map_update_elem(STARTS(tp), &now, &moved, BPF_ANY)) {
		c->map_full++;
		return;
	}
	bpf_map_delete_elem(STARTS(tp), &was);
}

static __always_inline int tp_bio_merge(struct trace_event_raw_block_bio *ctx, bool front)
{
	struct bio_counters *c = get_counters();
	struct rq_info ri = {};
	char rwbs[8];
	__u32 dev = ctx->dev, *disk = bpf_map_lookup_elem(&disk_of, &dev);

	if (!c)
		return 0;
	bpf_probe_read_kernel(rwbs, sizeof(rwbs), ctx->rwbs);
	ri.dev = disk ? *disk : dev;
	ri.bytes = ctx->nr_sector << 9;
	rwbs_read(rwbs, &ri);
	if (front)
		tp_follow_front(ri.dev, ctx->sector, ri.bytes, c);
	count_merged_current(&ri, c);
	return 0;
}

SEC("tracepoint/block/block_bio_backmerge")
int bio_tp_backmerge(struct trace_event_raw_block_bio *ctx)
{
	return tp_bio_merge(ctx, false);
}

SEC("tracepoint/block/block_bio_frontmerge")
int bio_tp_frontmerge(struct trace_event_raw_block_bio *ctx)
{
	return tp_bio_merge(ctx, true);
}

char LICENSE[] SEC("license") = "Dual BSD/GPL";
