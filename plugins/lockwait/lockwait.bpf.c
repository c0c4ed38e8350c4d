// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * Lock waits: futex wait syscalls (user space) and lock:contention_begin/end (kernel),
 * paired per thread, aggregated per lock and per (lock, thread, stack) in the kernel.
 * Only the first sighting of a (lock, thread, stack) row goes through the ring, so user
 * space can name the lock and the stack while the process still exists.
 */
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>
#include <bpf/bpf_core_read.h>

#include "loupe/emit.bpf.h"
#include "loupe/filter.bpf.h"
#include "loupe/hist.bpf.h"
#include "loupe/map.bpf.h"
#include "loupe/unwind.bpf.h"
#include "loupe/ustack.bpf.h"
#include "lockwait.h"

const volatile __u64 targ_max_age_ns = 10ULL * 1000 * 1000 * 1000;
const volatile __u64 targ_min_wait_ns = 0;
const volatile bool targ_user_stacks = true;
const volatile bool targ_kernel_stacks = true;
/* Kernel contention is system-wide unless the task filters select it: a process filter
 * keeps only the contention its own threads suffer. */
const volatile bool targ_pthread_stacks = false;
const volatile __u64 targ_pthread_max_gap_ns = 1000ULL * 1000 * 1000;
const volatile __u32 targ_rwlock_size = 56; /* sizeof(pthread_rwlock_t) on x86_64 glibc */
/* unwind = "dwarf": futex waits' user stacks are copies unwound in user space. */
const volatile bool targ_dwarf = false;
/* unwind = "tables": user stacks by the in-kernel unwinder (ids in loupe_unwind_stacks). */
const volatile bool targ_unwind_tables = false;
/* holders: the stack of the thread whose futex wake ended each wait. */
const volatile bool targ_holders = false;

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 10240);
	__type(key, struct lw_inflight_key);
	__type(value, struct lw_inflight_val);
} inflight SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 4096);
	__type(key, struct lw_lock_key);
	__type(value, struct lw_lock_val);
} locks SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 16384);
	__type(key, struct lw_waiter_key);
	__type(value, struct lw_waiter_val);
} waiters SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_STACK_TRACE);
	__uint(max_entries, 8192);
	__uint(key_size, sizeof(__u32));
	__uint(value_size, LW_STACK_DEPTH * sizeof(__u64));
} stacks SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 10240);
	__type(key, __u32); /* tid */
	__type(value, struct lw_pending_val);
} pending SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, LW_C_NR);
	__type(key, __u32);
	__type(value, __u64);
} counters SEC(".maps");

/* Never written: the zeroed value new lock entries start from (too big for the stack). */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct lw_lock_val);
} zero_lock SEC(".maps");

/* holders: the last wake per futex word (tgid, FUTEX kind, addr); LRU, as a word whose
 * waiters are gone is never asked again. */
struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, 16384); /* 4 x max_locks */
	__type(key, struct lw_lock_key);
	__type(value, struct lw_wake_val);
} wakes SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 4096); /* max_locks */
	__type(key, struct lw_holder_key);
	__type(value, struct lw_holder_val);
} holders SEC(".maps");

LOUPE_RING(first_seen, 64 * 1024);
/* unwind = "dwarf": every futex wait with its stack copy (user space shrinks it when off). */
LOUPE_RING(dwarf_waits, 4 * 1024 * 1024);
LOUPE_USTACK_SCRATCH(dwarf_scratch, struct lw_dwarf_wait);

static __always_inline void count(__u32 idx, __u64 n)
{
	__u64 *c = bpf_map_lookup_elem(&counters, &idx);

	if (c)
		*c += n;
}

/* The current thread's user stack: by the in-kernel unwinder, from the registers saved at
 * the syscall or uprobe trap, whose first frame (libc's futex call, or pthread_*lock at its
 * entry) is unwound by its own CFI and so keeps the caller; or by the frame-pointer walk,
 * which skips it. Counted when it fails. */
static __always_inline __s32 take_user_stack(void *ctx)
{
	__s32 id;

	if (targ_unwind_tables)
		id = loupe_unwind_user_stack();
	else
		id = bpf_get_stackid(ctx, &stacks, BPF_F_USER_STACK);
	if (id < 0)
		count(LW_C_USTACK_FAIL, 1);
	return id;
}

static __always_inline bool is_wait_op(__u32 op)
{
	switch (op & LW_FUTEX_CMD_MASK) {
	case LW_FUTEX_WAIT:
	case LW_FUTEX_LOCK_PI:
	case LW_FUTEX_WAIT_BITSET:
	case LW_FUTEX_WAIT_REQUEUE_PI:
	case LW_FUTEX_LOCK_PI2:
		return true;
	}
	return false;
}

/* Futex ops that wake waiters of uaddr (FUTEX_WAKE, FUTEX_CMP_REQUEUE, FUTEX_WAKE_OP,
 * FUTEX_UNLOCK_PI, FUTEX_WAKE_BITSET). */
static __always_inline bool is_wake_op(__u32 op)
{
	switch (op & LW_FUTEX_CMD_MASK) {
	case 1:
	case 4:
	case 5:
	case 7:
	case 10:
		return true;
	}
	return false;
}

/* The current thread releases futex `addr`: it may end waits on it. */
static __always_inline void note_wake(void *ctx, __u64 addr)
{
	__u64 pid_tgid = bpf_get_current_pid_tgid();
	struct lw_lock_key key = {.tgid = pid_tgid >> 32, .kind = LW_KIND_FUTEX, .addr = addr};
	struct lw_wake_val w = {};

	if (!loupe_filter_pass(pid_tgid))
		return;
	w.ts = bpf_ktime_get_ns();
	w.tid = (__u32)pid_tgid;
	w.user_stack_id = targ_user_stacks ? take_user_stack(ctx) : -1;
	bpf_get_current_comm(w.comm, sizeof(w.comm));
	count(LW_C_WAKES, 1);
	/* An LRU map evicts the oldest wake rather than fail; it fails only without memory. */
	if (bpf_map_update_elem(&wakes, &key, &w, BPF_ANY))
		count(LW_C_WAKES_FULL, 1);
}

/* A futex wait on `addr` that began at `start` ended: credit its time to the stack of
 * the thread whose wake came during it. */
static __always_inline void credit_holder(__u64 pid_tgid, __u64 addr, __u64 start, __u64 delta)
{
	struct lw_lock_key wk = {.tgid = pid_tgid >> 32, .kind = LW_KIND_FUTEX, .addr = addr};
	struct lw_holder_key hk = {};
	struct lw_holder_val *v, init = {};
	struct lw_wake_val *w = bpf_map_lookup_elem(&wakes, &wk);

	if (!w || w->ts < start)
		return; /* no wake during this wait: a timeout, a signal, or the value changed */
	hk.tgid = pid_tgid >> 32;
	hk.user_stack_id = w->user_stack_id;
	hk.addr = addr;
	count(LW_C_RELEASED_WAITS, 1);
	v = bpf_map_lookup_elem(&holders, &hk);
	if (v) {
		__sync_fetch_and_add(&v->waits, 1);
		__sync_fetch_and_add(&v->total_ns, delta);
		return;
	}
	init.waits = 1;
	init.total_ns = delta;
	__builtin_memcpy(init.comm, w->comm, sizeof(init.comm));
	if (bpf_map_update_elem(&holders, &hk, &init, BPF_NOEXIST)) {
		v = bpf_map_lookup_elem(&holders, &hk);
		if (!v) {
			count(LW_C_HOLDERS_FULL, 1);
			return;
		}
		__sync_fetch_and_add(&v->waits, 1);
		__sync_fetch_and_add(&v->total_ns, delta);
	}
}

static __always_inline __s32 user_stack(void *ctx, __u32 tid, __u64 addr, __u64 *caller_ip)
{
	struct lw_pending_val *p;

	if (!targ_user_stacks)
		return -1;
	if (targ_pthread_stacks) {
		/* The stack taken at pthread_*lock entry has every caller; the one a
		 * frame-pointer walk takes here has lost the frames between libc's syscall and
		 * the first frame-pointer function. Use it when it is about this very futex. */
		p = bpf_map_lookup_elem(&pending, &tid);
		if (p && p->user_stack_id >= 0 && addr >= p->lock &&
		    addr < p->lock + targ_rwlock_size &&
		    bpf_ktime_get_ns() - p->ts < targ_pthread_max_gap_ns) {
			count(LW_C_PTHREAD_STACKS, 1);
			*caller_ip = p->caller_ip;
			return p->user_stack_id;
		}
	}
	return take_user_stack(ctx);
}

static __always_inline void wait_begin(void *ctx, __u32 kind, __u64 key_addr, __u64 addr,
				       __u32 flags)
{
	__u64 pid_tgid = bpf_get_current_pid_tgid();
	struct lw_inflight_key key = {};
	struct lw_inflight_val val = {};
	struct lw_inflight_val *old;

	if (!loupe_filter_pass(pid_tgid))
		return;
	key.tid = (__u32)pid_tgid;
	key.kind = kind;
	key.addr = key_addr;
	val.start_ns = bpf_ktime_get_ns();
	val.addr = addr;
	val.flags = flags;
	val.user_stack_id = -1;
	val.kernel_stack_id = -1;
	if (kind == LW_KIND_FUTEX) {
		/* dwarf: the stack is copied at the wait's end, once it was a wait worth it. */
		if (!targ_dwarf)
			val.user_stack_id = user_stack(ctx, key.tid, addr, &val.caller_ip);
	} else if (targ_kernel_stacks) {
		val.kernel_stack_id = bpf_get_stackid(ctx, &stacks, 0);
		if (val.kernel_stack_id < 0)
			count(LW_C_KSTACK_FAIL, 1);
	}
	count(kind == LW_KIND_FUTEX ? LW_C_FUTEX_BEGIN : LW_C_KERNEL_BEGIN, 1);
	/* A begin still there means its end never came (a thread killed mid-wait, or a
	 * futex wait interrupted in a way the exit tracepoint missed). */
	old = bpf_map_lookup_elem(&inflight, &key);
	if (old && old->idle) {
		*old = val;
		return;
	}
	if (old) {
		if (val.start_ns - old->start_ns > targ_max_age_ns)
			count(LW_C_EXPIRED, 1);
		else
			count(LW_C_UNMATCHED, 1);
		*old = val;
		return;
	}
	if (bpf_map_update_elem(&inflight, &key, &val, BPF_ANY))
		count(LW_C_INFLIGHT_FULL, 1);
}

static __always_inline void record_lock(__u32 tgid, __u32 kind, __u64 addr, __u64 delta,
					__u32 flags)
{
	struct lw_lock_key key = {.tgid = tgid, .kind = kind, .addr = addr};
	struct lw_lock_val *v;
	__u32 zero = 0;
	void *init;

	init = bpf_map_lookup_elem(&zero_lock, &zero);
	v = init ? loupe_lookup_or_init(&locks, &key, init) : NULL;
	if (!v) {
		count(LW_C_LOCKS_FULL, 1);
		count(LW_C_LOST_NS, delta);
		return;
	}
	/* Contended locks are, by definition, hit from several CPUs at once: atomics keep
	 * the sums exact; max/min may lose a race, which only costs precision. */
	__sync_fetch_and_add(&v->waits, 1);
	__sync_fetch_and_add(&v->total_ns, delta);
	__sync_fetch_and_add(&v->slots[loupe_slot_bounded(loupe_log2_slot(delta), LW_HIST_SLOTS)],
			     1);
	if (delta > v->max_ns)
		v->max_ns = delta;
	if (v->min_ns == 0 || delta < v->min_ns)
		v->min_ns = delta;
	/* Flags of one lock hardly ever change; a lost race only drops a rare bit. */
	if ((v->flags | flags) != v->flags)
		v->flags |= flags;
}

static __always_inline void record_waiter(__u64 pid_tgid, __u32 kind,
					  const struct lw_inflight_val *w, __u64 delta)
{
	struct lw_waiter_key key = {};
	struct lw_waiter_val *v, init = {};
	struct lw_first_seen_event *e;

	key.tgid = kind == LW_KIND_KERNEL ? 0 : pid_tgid >> 32;
	key.tid = (__u32)pid_tgid;
	key.addr = w->addr;
	key.kind = kind;
	key.user_stack_id = w->user_stack_id;
	key.kernel_stack_id = w->kernel_stack_id;
	key.caller_ip = w->caller_ip;
	v = bpf_map_lookup_elem(&waiters, &key);
	if (v) {
		__sync_fetch_and_add(&v->waits, 1);
		__sync_fetch_and_add(&v->total_ns, delta);
		if (delta > v->max_ns)
			v->max_ns = delta;
		v->last_ns = w->start_ns + delta;
		return;
	}
	init.waits = 1;
	init.total_ns = delta;
	init.max_ns = delta;
	init.first_ns = w->start_ns;
	init.last_ns = w->start_ns + delta;
	bpf_get_current_comm(init.comm, sizeof(init.comm));
	if (bpf_map_update_elem(&waiters, &key, &init, BPF_NOEXIST)) {
		/* -EEXIST: another CPU inserted it first; retry once as an update. */
		v = bpf_map_lookup_elem(&waiters, &key);
		if (!v) {
			count(LW_C_WAITERS_FULL, 1);
			return;
		}
		__sync_fetch_and_add(&v->waits, 1);
		__sync_fetch_and_add(&v->total_ns, delta);
		v->last_ns = w->start_ns + delta;
		return;
	}
	e = LOUPE_RESERVE(first_seen, struct lw_first_seen_event, LW_RECORD_FIRST_SEEN,
			  LW_RECORD_FIRST_SEEN_VERSION);
	if (!e) {
		count(LW_C_FIRST_SEEN_LOST, 1);
		return;
	}
	e->tgid = pid_tgid >> 32;
	e->kind = kind;
	e->addr = w->addr;
	e->user_stack_id = w->user_stack_id;
	e->kernel_stack_id = w->kernel_stack_id;
	e->caller_ip = w->caller_ip;
	LOUPE_SUBMIT(first_seen, e);
}

/* A futex wait with the thread's user registers (saved at the syscall: the wait's own
 * stack) and a slice of its stack, for user space to unwind and aggregate. */
static __always_inline void send_dwarf_wait(__u64 pid_tgid, __u64 addr, __u64 delta)
{
	struct lw_dwarf_wait *r = loupe_ustack_scratch(&dwarf_scratch);
	__u64 size;

	if (!r)
		return;
	r->type = LW_RECORD_DWARF_WAIT;
	r->version = LW_RECORD_DWARF_WAIT_VERSION;
	r->tgid = pid_tgid >> 32;
	r->tid = (__u32)pid_tgid;
	r->addr = addr;
	r->delta_ns = delta;
	r->end_ns = bpf_ktime_get_ns();
	bpf_get_current_comm(r->comm, sizeof(r->comm));
	r->us.stack_len = 0;
	r->us.flags = 0;
	if (targ_user_stacks && loupe_ustack_regs_task(&r->us))
		loupe_ustack_copy(&r->us, (__u8 *)(r + 1));
	size = loupe_ustack_record_len(sizeof(*r), &r->us);
	r->len = size;
	loupe_output(&dwarf_waits, &dwarf_waits_lost, r, size);
}

static __always_inline void wait_end(__u32 kind, __u64 key_addr)
{
	__u64 pid_tgid = bpf_get_current_pid_tgid();
	struct lw_inflight_key key = {};
	struct lw_inflight_val *v, w;
	__u64 delta;

	if (!loupe_filter_pass(pid_tgid))
		return;
	key.tid = (__u32)pid_tgid;
	key.kind = kind;
	key.addr = key_addr;
	v = bpf_map_lookup_elem(&inflight, &key);
	if (!v || v->idle) {
		/* Non-wait futex ops never made an entry: only kernel ends are unmatched here,
		 * futex exits are filtered by the entry's presence. */
		if (kind == LW_KIND_KERNEL)
			count(LW_C_UNMATCHED, 1);
		return;
	}
	w = *v;
	/* A thread's futex slot stays, idle, for its next wait: a hash insert and delete per
	 * wait cost more than the rest of the wait path. collect() drops slots idle for
	 * longer than max_age. Kernel-lock keys name the lock, so those are deleted. */
	if (kind == LW_KIND_FUTEX)
		v->idle = 1;
	else
		bpf_map_delete_elem(&inflight, &key);
	delta = bpf_ktime_get_ns() - w.start_ns;
	if ((__s64)delta < 0 || delta > targ_max_age_ns) {
		count(LW_C_DISCARDED, 1);
		return;
	}
	count(kind == LW_KIND_FUTEX ? LW_C_FUTEX_MATCHED : LW_C_KERNEL_MATCHED, 1);
	if (delta < targ_min_wait_ns)
		return;
	record_lock(kind == LW_KIND_KERNEL ? 0 : pid_tgid >> 32, kind, w.addr, delta,
		    kind == LW_KIND_KERNEL ? w.flags : 0);
	if (targ_holders && kind == LW_KIND_FUTEX)
		credit_holder(pid_tgid, w.addr, w.start_ns, delta);
	if (targ_dwarf && kind == LW_KIND_FUTEX)
		send_dwarf_wait(pid_tgid, w.addr, delta);
	else
		record_waiter(pid_tgid, kind, &w, delta);
}

SEC("tracepoint/syscalls/sys_enter_futex")
int lw_futex_enter(struct trace_event_raw_sys_enter *ctx)
{
	__u32 op = (__u32)ctx->args[1];

	if (!is_wait_op(op)) {
		count(LW_C_NON_WAIT_OPS, 1);
		if (targ_holders && is_wake_op(op))
			note_wake(ctx, ctx->args[0]);
		return 0;
	}
	wait_begin(ctx, LW_KIND_FUTEX, 0, ctx->args[0], op);
	return 0;
}

SEC("tracepoint/syscalls/sys_exit_futex")
int lw_futex_exit(struct trace_event_raw_sys_exit *ctx)
{
	wait_end(LW_KIND_FUTEX, 0);
	return 0;
}

/* futex_wait(2), Linux 6.7: always a wait. */
SEC("tracepoint/syscalls/sys_enter_futex_wait")
int lw_futex_wait_enter(struct trace_event_raw_sys_enter *ctx)
{
	wait_begin(ctx, LW_KIND_FUTEX, 0, ctx->args[0], LW_FUTEX_WAIT);
	return 0;
}

SEC("tracepoint/syscalls/sys_exit_futex_wait")
int lw_futex_wait_exit(struct trace_event_raw_sys_exit *ctx)
{
	wait_end(LW_KIND_FUTEX, 0);
	return 0;
}

/* futex_waitv(2), Linux 5.16: waits on up to 128 futexes; attributed to the first one. */
SEC("tracepoint/syscalls/sys_enter_futex_waitv")
int lw_futex_waitv_enter(struct trace_event_raw_sys_enter *ctx)
{
	struct futex_waitv first = {};

	if (ctx->args[1] == 0 || bpf_probe_read_user(&first, sizeof(first), (void *)ctx->args[0]))
		return 0;
	wait_begin(ctx, LW_KIND_FUTEX, 0, first.uaddr, LW_FUTEX_WAIT);
	return 0;
}

SEC("tracepoint/syscalls/sys_exit_futex_waitv")
int lw_futex_waitv_exit(struct trace_event_raw_sys_exit *ctx)
{
	wait_end(LW_KIND_FUTEX, 0);
	return 0;
}

SEC("tp_btf/contention_begin")
int BPF_PROG(lw_contention_begin_btf, void *lock, unsigned int flags)
{
	wait_begin(ctx, LW_KIND_KERNEL, (__u64)lock, (__u64)lock, flags);
	return 0;
}

SEC("tp_btf/contention_end")
int BPF_PROG(lw_contention_end_btf, void *lock, int ret)
{
	wait_end(LW_KIND_KERNEL, (__u64)lock);
	return 0;
}

SEC("tracepoint/lock/contention_begin")
int lw_contention_begin(struct trace_event_raw_contention_begin *ctx)
{
	wait_begin(ctx, LW_KIND_KERNEL, (__u64)ctx->lock_addr, (__u64)ctx->lock_addr, ctx->flags);
	return 0;
}

SEC("tracepoint/lock/contention_end")
int lw_contention_end(struct trace_event_raw_contention_end *ctx)
{
	wait_end(LW_KIND_KERNEL, (__u64)ctx->lock_addr);
	return 0;
}

/* Optional: pthread entry points, for the full caller stack of the futex wait that may
 * follow. Arg 0 is the mutex/rwlock. */
SEC("uprobe")
int BPF_KPROBE(lw_pthread_lock, void *lock)
{
	__u64 pid_tgid = bpf_get_current_pid_tgid();
	struct lw_pending_val p = {};
	__u32 tid = (__u32)pid_tgid;

	if (!loupe_filter_pass(pid_tgid))
		return 0;
	count(LW_C_PTHREAD_CALLS, 1);
	p.lock = (__u64)lock;
	p.ts = bpf_ktime_get_ns();
	p.user_stack_id = take_user_stack(ctx);
	/* At function entry the return address is at the top of the stack (the unwinder has it
	 * already: user space then does not add it twice). */
	bpf_probe_read_user(&p.caller_ip, sizeof(p.caller_ip), (void *)PT_REGS_SP(ctx));
	/* Lost, the futex wait that follows keeps the shorter stack it takes itself. */
	if (bpf_map_update_elem(&pending, &tid, &p, BPF_ANY))
		count(LW_C_PENDING_FULL, 1);
	return 0;
}

char LICENSE[] SEC("license") = "Dual BSD/GPL";
