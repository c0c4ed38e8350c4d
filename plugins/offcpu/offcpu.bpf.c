// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * Off-CPU time by stack, with who woke it and how long it then waited for a CPU.
 *
 * sched_switch does both halves: the thread leaving the CPU (prev, the current task) is
 * remembered with its stacks and state if it passes the target filter; the thread
 * entering (next) is looked up in that table, and only there, so nothing else needs a
 * filter: a thread is in the table only if its switch-out passed it. sched_waking marks
 * a remembered thread woken (and by whom), which splits its time off the CPU into
 * blocked (switch-out to wake-up) and run-queue wait (wake-up to switch-in); a preempted
 * thread waited for a CPU the whole time.
 *
 * Three flavours of the same hooks (tp_btf, raw_tp, the classic tracepoint), chosen in
 * user space by probing; the bodies are shared.
 */
#include "vmlinux.h"
#include <bpf/bpf_core_read.h>
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>

#include "loupe/filter.bpf.h"
#include "loupe/handover.bpf.h"
#include "loupe/hist.bpf.h"
#include "loupe/map.bpf.h"
#include "loupe/thin.bpf.h"
#include "loupe/unwind.bpf.h"
#include "offcpu.h"

const volatile bool targ_user_stacks = true;
const volatile bool targ_kernel_stacks = true;
const volatile bool targ_per_thread = false;
const volatile bool targ_wakers = true;
const volatile bool targ_run_queue = true;
const volatile __u64 targ_min_block_ns = 1000;
const volatile __u64 targ_runq_threshold_ns = 0;
/* unwind = "tables": user stacks by the in-kernel unwinder (ids in loupe_unwind_stacks). */
const volatile bool targ_unwind_tables = false;

struct {
	__uint(type, BPF_MAP_TYPE_STACK_TRACE);
	__uint(max_entries, 16384); /* max_stacks */
	__uint(key_size, sizeof(__u32));
	__uint(value_size, OC_MAX_STACK_DEPTH * sizeof(__u64));
} stacks SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 16384); /* max_threads */
	__type(key, __u32);	    /* tid */
	__type(value, struct oc_blocked);
} blocked SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 16384); /* max_keys */
	__type(key, struct oc_key);
	__type(value, struct oc_val);
} offcpu SEC(".maps");

/* A process's keys leave `offcpu` at its last switch, handed to user space
 * (loupe/handover.bpf.h). */
LOUPE_HANDOVER(handover, struct oc_key, struct oc_val, struct oc_handover_rec);

struct oc_proc_key {
	__u32 tgid;
	char comm[OC_COMM_LEN];
};

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_HASH);
	__uint(max_entries, 1024); /* process_limit */
	__type(key, struct oc_proc_key);
	__type(value, struct oc_hist);
} runq_procs SEC(".maps");

/* Per CPU: the run-queue waits of the target's threads that got this CPU. */
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct oc_hist);
} runq_cpus SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 4096); /* max_blockers */
	__type(key, struct oc_blocker_key);
	__type(value, struct oc_blocker_val);
} blockers SEC(".maps");

/* Never written: the zero value new per-process histograms start from. */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct oc_hist);
} zero_hist SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct oc_counters);
} counters SEC(".maps");

static __always_inline struct oc_counters *get_counters(void)
{
	__u32 zero = 0;

	return bpf_map_lookup_elem(&counters, &zero);
}

/* The current task's stacks; -1 where there is none (kernel thread) or it failed. */
static __always_inline void take_stacks(void *ctx, bool user, bool kernel, __s32 *ustack,
					__s32 *kstack, __u64 *fail_user, __u64 *fail_kernel)
{
	long err;

	*ustack = -1;
	*kstack = -1;
	if (user) {
		if (bpf_get_current_task_btf()->mm) {
			if (targ_unwind_tables)
				err = loupe_unwind_user_stack();
			else
				err = bpf_get_stackid(ctx, &stacks, BPF_F_USER_STACK);
			if (err >= 0)
				*ustack = err;
			else
				(*fail_user)++;
		}
	}
	if (kernel) {
		err = bpf_get_stackid(ctx, &stacks, 0);
		if (err >= 0)
			*kstack = err;
		else
			(*fail_kernel)++;
	}
}

static __always_inline void add_offcpu(struct oc_counters *c, const struct oc_blocked *b, __u32 tid,
				       __u64 delta);

static __always_inline __u64 runtime_of(struct task_struct *task)
{
	return BPF_CORE_READ(task, se.sum_exec_runtime);
}

/* The current task (prev) leaves the CPU for `reason`. */
static __always_inline void switch_out(void *ctx, __u32 reason)
{
	__u64 id = bpf_get_current_pid_tgid();
	struct oc_counters *c;
	struct oc_blocked b = {}, *last;
	__u32 tid = (__u32)id;

	if (tid == 0 || !loupe_filter_pass(id))
		return;
	c = get_counters();
	if (!c)
		return;
	/* Thinned out: the entry still marks the thread off the CPU (so its switch-in is not
	 * taken for a missed switch-out), without the stacks that are this hook's cost. */
	b.weight = loupe_thin_weight();
	if (!b.weight)
		c->thinned++;
	b.ts_out = bpf_ktime_get_ns();
	/* A plain load through the current task's BTF pointer: no probe-read helper call. */
	b.runtime = bpf_get_current_task_btf()->se.sum_exec_runtime;
	last = bpf_map_lookup_elem(&blocked, &tid);
	if (last && !last->running) {
		/* Its switch-in was never delivered: it left the CPU at last->ts_out, came back
		 * unseen, and has run for runtime - last->runtime since. The rest of the time
		 * since was that block, under the stacks its switch-out took. */
		__u64 wall = b.ts_out - last->ts_out, cpu = b.runtime - last->runtime;

		c->missed_ins++;
		if (last->weight && b.ts_out > last->ts_out && b.runtime >= last->runtime &&
		    wall > cpu) {
			c->recovered_ns += (wall - cpu) * last->weight;
			add_offcpu(c, last, tid, wall - cpu);
		}
	}
	if (last && last->running) {
		/* The common case: the entry its last switch-in left, rewritten in place
		 * instead of replaced (a second hash, bucket lock and element swap a switch).
		 * Wakers leave an entry alone while it says running, so it says off the CPU
		 * only once whole; the barrier keeps that store last (x86-64 keeps stores in
		 * order). */
		last->ts_out = b.ts_out;
		last->runtime = b.runtime;
		last->ts_wake = 0;
		last->ts_in = 0;
		last->tgid = id >> 32;
		last->reason = reason;
		last->waker_tgid = 0;
		last->waker_tid = 0;
		last->waker_user_stack_id = -1;
		last->waker_kernel_stack_id = -1;
		last->weight = b.weight;
		last->user_stack_id = -1;
		last->kernel_stack_id = -1;
		if (b.weight) {
			bpf_get_current_comm(last->comm, sizeof(last->comm));
			take_stacks(ctx, targ_user_stacks, targ_kernel_stacks, &last->user_stack_id,
				    &last->kernel_stack_id, &c->user_stack_fail,
				    &c->kernel_stack_fail);
		}
		c->switches_out++;
		asm volatile("" ::: "memory");
		last->running = 0;
		return;
	}
	b.tgid = id >> 32;
	b.reason = reason;
	b.waker_user_stack_id = -1;
	b.waker_kernel_stack_id = -1;
	b.user_stack_id = -1;
	b.kernel_stack_id = -1;
	if (b.weight) {
		bpf_get_current_comm(b.comm, sizeof(b.comm));
		take_stacks(ctx, targ_user_stacks, targ_kernel_stacks, &b.user_stack_id,
			    &b.kernel_stack_id, &c->user_stack_fail, &c->kernel_stack_fail);
	}
	c->switches_out++;
	if (bpf_map_update_elem(&blocked, &tid, &b, BPF_ANY))
		c->blocked_full++;
}

static __always_inline void add_runq(struct oc_counters *c, const struct oc_blocked *b, __u64 delay)
{
	struct oc_proc_key pk = {};
	struct oc_hist *h;
	__u32 zero = 0;
	__u32 slot = loupe_log2_slot(delay);
	__u64 w = b->weight;

	c->runq_waits += w;
	h = bpf_map_lookup_elem(&runq_cpus, &zero);
	if (h)
		LOUPE_HIST_RECORD_W(h, delay, slot, OC_HIST_SLOTS, w);
	pk.tgid = b->tgid;
	__builtin_memcpy(pk.comm, b->comm, sizeof(pk.comm));
	h = bpf_map_lookup_elem(&zero_hist, &zero);
	h = h ? loupe_lookup_or_init(&runq_procs, &pk, h) : NULL;
	if (!h) {
		c->runq_procs_full += w;
		return;
	}
	LOUPE_HIST_RECORD_W(h, delay, slot, OC_HIST_SLOTS, w);
}

/* The current task (prev) held this CPU while a thread of the target waited for it. */
static __always_inline void add_blocker(void *ctx, struct oc_counters *c, __u64 delay, __u64 w)
{
	__u64 id = bpf_get_current_pid_tgid();
	struct oc_blocker_key k = {};
	struct oc_blocker_val one = {w, delay * w}, *v;
	long err;

	if ((__u32)id == 0)
		return; /* the CPU was idle: the wait was the wake-up's own latency */
	k.tgid = id >> 32;
	bpf_get_current_comm(k.comm, sizeof(k.comm));
	take_stacks(ctx, targ_user_stacks, targ_kernel_stacks, &k.user_stack_id, &k.kernel_stack_id,
		    &c->user_stack_fail, &c->kernel_stack_fail);
	v = bpf_map_lookup_elem(&blockers, &k);
	if (v) {
		__sync_fetch_and_add(&v->count, w);
		__sync_fetch_and_add(&v->delay_ns, delay * w);
		return;
	}
	err = bpf_map_update_elem(&blockers, &k, &one, BPF_NOEXIST);
	if (err == -17 /* EEXIST */) {
		v = bpf_map_lookup_elem(&blockers, &k);
		if (v) {
			__sync_fetch_and_add(&v->count, w);
			__sync_fetch_and_add(&v->delay_ns, delay * w);
		}
	} else if (err) {
		c->blockers_full += w;
	}
}

static __always_inline void add_offcpu(struct oc_counters *c, const struct oc_blocked *b, __u32 tid,
				       __u64 delta)
{
	struct oc_key k = {};
	__u64 w = b->weight;
	struct oc_val one = {delta * w, w}, *v;
	long err;

	k.tgid = b->tgid;
	k.tid = targ_per_thread ? tid : 0;
	k.user_stack_id = b->user_stack_id;
	k.kernel_stack_id = b->kernel_stack_id;
	k.reason = b->reason;
	k.waker_user_stack_id = -1;
	k.waker_kernel_stack_id = -1;
	__builtin_memcpy(k.comm, b->comm, sizeof(k.comm));
	if (targ_wakers && b->ts_wake) {
		k.waker_tgid = b->waker_tgid;
		k.waker_user_stack_id = b->waker_user_stack_id;
		k.waker_kernel_stack_id = b->waker_kernel_stack_id;
		__builtin_memcpy(k.waker_comm, b->waker_comm, sizeof(k.waker_comm));
	}
	c->blocks += w;
	v = bpf_map_lookup_elem(&offcpu, &k);
	if (v) {
		__sync_fetch_and_add(&v->total_ns, delta * w);
		__sync_fetch_and_add(&v->count, w);
		return;
	}
	err = bpf_map_update_elem(&offcpu, &k, &one, BPF_NOEXIST);
	if (err == -17 /* EEXIST: another CPU inserted it meanwhile */) {
		v = bpf_map_lookup_elem(&offcpu, &k);
		if (v) {
			__sync_fetch_and_add(&v->total_ns, delta * w);
			__sync_fetch_and_add(&v->count, w);
		}
	} else if (err) {
		c->keys_full += w;
		c->lost_ns += delta * w;
	} else {
		if (!handover_track(k.tgid, &k))
			c->handover_unlisted++;
	}
}

/* Thread `tid` gets the CPU; `next` is its task where the hook has it (NULL: tracepoint). */
static __always_inline void switch_in(void *ctx, __u32 tid, struct task_struct *next)
{
	struct oc_blocked b, *p;
	struct oc_counters *c;
	__u64 now, runq_from = 0;

	p = bpf_map_lookup_elem(&blocked, &tid);
	if (!p)
		return;
	now = bpf_ktime_get_ns();
	c = get_counters();
	if (!c)
		return;
	if (p->running) {
		/* Its switch-out was never delivered: since it was switched in at ts_in it ran
		 * for what its CPU time grew and was off the CPU for the rest, for a reason and
		 * under stacks nobody saw. */
		c->missed_outs++;
		if (next) {
			__u64 rt = runtime_of(next), wall = now - p->ts_in, cpu = rt - p->runtime;

			if (now > p->ts_in && rt >= p->runtime && wall > cpu)
				c->missed_out_ns += wall - cpu;
			p->runtime = rt;
		}
		p->ts_in = now;
		return;
	}
	__builtin_memcpy(&b, p, sizeof(b));
	/* Kept, running, until the thread's next switch-out (or its exit). Its CPU time has
	 * not changed since that switch-out. */
	p->running = 1;
	p->ts_in = now;
	if (now < b.ts_out || !b.weight)
		return;
	if (b.ts_wake)
		runq_from = b.ts_wake;
	else if (b.reason == OC_REASON_PREEMPTED)
		runq_from = b.ts_out;
	if (targ_run_queue && runq_from && now >= runq_from) {
		add_runq(c, &b, now - runq_from);
		if (targ_runq_threshold_ns && now - runq_from >= targ_runq_threshold_ns)
			add_blocker(ctx, c, now - runq_from, b.weight);
	}
	if (now - b.ts_out < targ_min_block_ns) {
		c->below_min += b.weight;
		return;
	}
	add_offcpu(c, &b, tid, now - b.ts_out);
}

/* Thread `tid` is being woken by the current task. */
static __always_inline void waking(void *ctx, __u32 tid)
{
	struct oc_blocked *b = bpf_map_lookup_elem(&blocked, &tid);
	struct oc_counters *c;
	__u64 id;

	if (!b || b->running || b->ts_wake || !b->weight)
		return;
	c = get_counters();
	if (!c)
		return;
	b->ts_wake = bpf_ktime_get_ns();
	c->wakeups += b->weight;
	if (!targ_wakers)
		return;
	id = bpf_get_current_pid_tgid();
	b->waker_tgid = id >> 32;
	b->waker_tid = (__u32)id;
	bpf_get_current_comm(b->waker_comm, sizeof(b->waker_comm));
	take_stacks(ctx, targ_user_stacks, targ_kernel_stacks, &b->waker_user_stack_id,
		    &b->waker_kernel_stack_id, &c->waker_stack_fail, &c->waker_stack_fail);
}

/* prev->__state at the switch (tp_btf and raw_tp see the raw value). */
static __always_inline __u32 reason_of_state(bool preempt, __u32 state)
{
	if (preempt)
		return OC_REASON_PREEMPTED;
	if (state & 0x1) /* TASK_INTERRUPTIBLE */
		return OC_REASON_SLEEP;
	if (state & 0x2) /* TASK_UNINTERRUPTIBLE; with TASK_NOLOAD it is TASK_IDLE */
		return (state & 0x400) ? OC_REASON_IDLE : OC_REASON_DISK;
	if ((state & 0xff) == 0)
		return OC_REASON_PREEMPTED; /* runnable: yielded, or woken before it left */
	return OC_REASON_OTHER;
}

/* The thread's last switch (it is the current task): it never comes back, and its entry
 * goes with it; the process's last thread takes its keys out of the map, handed to user
 * space. */
static __always_inline void thread_exit(__u32 tid)
{
	struct oc_counters *c;

	if (tid)
		bpf_map_delete_elem(&blocked, &tid);
	c = get_counters();
	if (c)
		c->handed_over += handover_exit(&offcpu, OC_REC_HANDOVER, OC_REC_HANDOVER_VERSION,
						&c->handover_full);
}

static __always_inline void on_switch_btf(void *ctx, bool preempt, struct task_struct *prev,
					  struct task_struct *next, __u32 prev_state)
{
	/* TASK_DEAD, or exit_state set: the thread's last switch. */
	if (!(prev_state & 0x80) && !BPF_CORE_READ(prev, exit_state))
		switch_out(ctx, reason_of_state(preempt, prev_state));
	else
		thread_exit(BPF_CORE_READ(prev, pid));
	switch_in(ctx, BPF_CORE_READ(next, pid), next);
}

SEC("tp_btf/sched_switch")
int BPF_PROG(oc_btf_switch, bool preempt, struct task_struct *prev, struct task_struct *next,
	     unsigned int prev_state)
{
	on_switch_btf(ctx, preempt, prev, next, prev_state);
	return 0;
}

SEC("tp_btf/sched_waking")
int BPF_PROG(oc_btf_waking, struct task_struct *p)
{
	waking(ctx, BPF_CORE_READ(p, pid));
	return 0;
}

SEC("raw_tp/sched_switch")
int BPF_PROG(oc_raw_switch, bool preempt, struct task_struct *prev, struct task_struct *next,
	     unsigned int prev_state)
{
	on_switch_btf(ctx, preempt, prev, next, prev_state);
	return 0;
}

SEC("raw_tp/sched_waking")
int BPF_PROG(oc_raw_waking, struct task_struct *p)
{
	waking(ctx, BPF_CORE_READ(p, pid));
	return 0;
}

/* The classic tracepoint reports the state as a TASK_REPORT bit (or TASK_REPORT_MAX,
 * 0x100, when preempted). */
SEC("tracepoint/sched/sched_switch")
int oc_tp_switch(struct trace_event_raw_sched_switch *ctx)
{
	long state = ctx->prev_state;
	__u32 reason;

	if (state & 0x100)
		reason = OC_REASON_PREEMPTED;
	else if (state == 0)
		reason = OC_REASON_PREEMPTED;
	else if (state & 0x1)
		reason = OC_REASON_SLEEP;
	else if (state & 0x2)
		reason = OC_REASON_DISK;
	else if (state & 0x80)
		reason = OC_REASON_IDLE;
	else
		reason = OC_REASON_OTHER;
	if (!(state & 0x30)) /* EXIT_DEAD, EXIT_ZOMBIE: the thread's last switch */
		switch_out(ctx, reason);
	else
		thread_exit(ctx->prev_pid);
	switch_in(ctx, ctx->next_pid, NULL);
	return 0;
}

SEC("tracepoint/sched/sched_waking")
int oc_tp_waking(struct trace_event_raw_sched_wakeup_template *ctx)
{
	waking(ctx, ctx->pid);
	return 0;
}

char LICENSE[] SEC("license") = "Dual BSD/GPL";
