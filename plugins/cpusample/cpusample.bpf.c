// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * On-CPU sampling: one perf_event program fired by a software cpu-clock event on every
 * CPU. Samples are aggregated in the kernel per (process, thread?, comm, user stack,
 * kernel stack), so the cost per sample is two stack walks and one hash update, and
 * nothing crosses to user space until collect().
 */
#include "vmlinux.h"
#include <bpf/bpf_core_read.h>
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>

#include "loupe/emit.bpf.h"
#include "loupe/filter.bpf.h"
#include "loupe/handover.bpf.h"
#include "loupe/thin.bpf.h"
#include "loupe/unwind.bpf.h"
#include "loupe/ustack.bpf.h"
#include "cpusample.h"

#define EFAULT 14
#define EEXIST 17

const volatile bool targ_user_stacks = true;
const volatile bool targ_kernel_stacks = true;
const volatile bool targ_per_thread = false;
const volatile bool targ_include_idle = false;
/* unwind = "tables": user stacks by the in-kernel unwinder (ids in loupe_unwind_stacks). */
const volatile bool targ_unwind_tables = false;

struct {
	__uint(type, BPF_MAP_TYPE_STACK_TRACE);
	__uint(max_entries, 16384);
	__uint(key_size, sizeof(__u32));
	__uint(value_size, CS_MAX_STACK_DEPTH * sizeof(__u64));
} stacks SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 16384);
	__type(key, struct cs_key);
	__type(value, __u64);
} counts SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct cs_counters);
} counters SEC(".maps");

/* A process's keys leave the map at its exit, handed to user space (loupe/handover.bpf.h). */
LOUPE_HANDOVER(handover, struct cs_key, __u64, struct cs_handover_rec);

/* unwind = "dwarf": samples travel one by one with their stack copy. User space sizes the
 * ring (a page when unused). */
LOUPE_RING(dwarf_ring, 4 * 1024 * 1024);
LOUPE_USTACK_SCRATCH(dwarf_scratch, struct cs_dwarf_rec);

/* Whether the interrupted context was kernel mode; only then is a kernel stack expected. */
static __always_inline bool sampled_in_kernel(struct bpf_perf_event_data *ctx)
{
#if defined(__TARGET_ARCH_x86)
	/* The context allows only 8-byte loads; cs sits in the low bits of its word. */
	__u64 cs = *(volatile __u64 *)((char *)ctx +
				       __builtin_offsetof(struct bpf_perf_event_data, regs.cs));

	return (cs & 3) == 0;
#elif defined(__TARGET_ARCH_arm64)
	return (ctx->regs.pstate & 0xf) != 0; /* PSR_MODE_EL0t == 0 */
#else
	return true;
#endif
}

static __always_inline void count_stack_error(struct cs_counters *c, long err, bool user)
{
	if (err == -EFAULT) {
		if (user)
			c->user_efault++;
		else
			c->kernel_efault++;
	} else if (err == -EEXIST) {
		if (user)
			c->user_eexist++;
		else
			c->kernel_eexist++;
	} else {
		if (user)
			c->user_other++;
		else
			c->kernel_other++;
	}
}

/* Both unwinding modes take the same samples: the counters when this one is to be taken,
 * NULL (and why, counted) when it is idle time not asked for, outside the target, or
 * thinned out. *weight: the samples it stands for. */
static __always_inline struct cs_counters *admit_sample(__u64 id, __u32 *weight)
{
	__u32 zero = 0;
	struct cs_counters *c = bpf_map_lookup_elem(&counters, &zero);

	if (!c)
		return NULL;
	if ((__u32)id == 0 && !targ_include_idle) {
		c->idle++;
		return NULL;
	}
	if (!loupe_filter_pass(id)) {
		c->filtered++;
		return NULL;
	}
	*weight = loupe_thin_weight();
	if (!*weight) {
		c->thinned++;
		return NULL;
	}
	c->samples += *weight;
	return c;
}

SEC("perf_event")
int cs_sample(struct bpf_perf_event_data *ctx)
{
	__u64 id = bpf_get_current_pid_tgid();
	__u32 weight = 1;
	struct cs_counters *c = admit_sample(id, &weight);
	struct cs_key key = {};
	__u64 one = weight, *val;
	long err;

	if (!c)
		return 0;
	key.tgid = id >> 32;
	key.pid = targ_per_thread ? (__u32)id : 0;
	bpf_get_current_comm(key.comm, sizeof(key.comm));
	key.user_stack_id = -1;
	key.kernel_stack_id = -1;

	if (targ_user_stacks) {
		struct task_struct *task = (void *)bpf_get_current_task();

		/* Kernel threads have no user stack: not a failure. */
		if (BPF_CORE_READ(task, mm)) {
			if (targ_unwind_tables)
				err = loupe_unwind_user_stack();
			else
				err = bpf_get_stackid(ctx, &stacks, BPF_F_USER_STACK);
			if (err >= 0)
				key.user_stack_id = err;
			else
				count_stack_error(c, err, true);
		}
	}
	if (targ_kernel_stacks && sampled_in_kernel(ctx)) {
		err = bpf_get_stackid(ctx, &stacks, 0);
		if (err >= 0)
			key.kernel_stack_id = err;
		else
			count_stack_error(c, err, false);
	}

	val = bpf_map_lookup_elem(&counts, &key);
	if (val) {
		__sync_fetch_and_add(val, one);
		return 0;
	}
	err = bpf_map_update_elem(&counts, &key, &one, BPF_NOEXIST);
	if (err == -EEXIST) {
		/* Another CPU inserted the same key between lookup and update. */
		val = bpf_map_lookup_elem(&counts, &key);
		if (val)
			__sync_fetch_and_add(val, one);
	} else if (err) {
		c->counts_full += one;
	} else {
		if (!handover_track(key.tgid, &key))
			c->handover_unlisted++;
	}
	return 0;
}

/* A process's last thread exits: its keys go to user space, their room back to the map. */
SEC("tracepoint/sched/sched_process_exit")
int cs_exit(void *ctx)
{
	__u32 zero = 0;
	struct cs_counters *c = bpf_map_lookup_elem(&counters, &zero);

	if (c)
		c->handed_over += handover_exit(&counts, CS_REC_HANDOVER, CS_REC_HANDOVER_VERSION,
						&c->handover_full);
	return 0;
}

/* unwind = "dwarf": the same filters, then registers + a stack slice + the kernel stack id
 * in a ring record; user space unwinds, aggregates and reports like the counts above. */
SEC("perf_event")
int cs_sample_dwarf(struct bpf_perf_event_data *ctx)
{
	__u64 id = bpf_get_current_pid_tgid();
	__u32 weight = 1;
	struct cs_counters *c = admit_sample(id, &weight);
	struct cs_dwarf_rec *r;
	__u64 size;
	long err;

	if (!c)
		return 0;
	r = loupe_ustack_scratch(&dwarf_scratch);
	if (!r)
		return 0;
	r->type = CS_REC_DWARF;
	r->version = CS_REC_DWARF_VERSION;
	r->tgid = id >> 32;
	r->pid = (__u32)id;
	bpf_get_current_comm(r->comm, sizeof(r->comm));
	r->kernel_stack_id = -1;
	r->has_user = 0;
	r->weight = weight;
	r->us.stack_len = 0;
	r->us.flags = 0;
	if (targ_user_stacks && loupe_ustack_regs_perf(ctx, &r->us)) {
		r->has_user = 1;
		loupe_ustack_copy(&r->us, (__u8 *)(r + 1));
	}
	if (targ_kernel_stacks && sampled_in_kernel(ctx)) {
		err = bpf_get_stackid(ctx, &stacks, 0);
		if (err >= 0)
			r->kernel_stack_id = err;
		else
			count_stack_error(c, err, false);
	}
	size = loupe_ustack_record_len(sizeof(*r), &r->us);
	r->len = size;
	if (loupe_output(&dwarf_ring, &dwarf_ring_lost, r, size) == 0)
		c->dwarf_sent++;
	return 0;
}

char LICENSE[] SEC("license") = "Dual BSD/GPL";
