// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/* Per-syscall counts from raw_syscalls:sys_enter, aggregated in the kernel. */
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>

#include "loupe/filter.bpf.h"
#include "syscount.h"

const volatile bool targ_per_process = false;

/* Per-CPU: the hot path never contends on a cache line; user space merges the CPUs. */
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_HASH);
	__uint(max_entries, SYSCOUNT_MAX_ENTRIES);
	__type(key, struct syscount_key);
	__type(value, struct syscount_val);
} counts SEC(".maps");

/* The common case, counts not per process: one slot per syscall number, per CPU. An
 * array's lookup is inlined by the verifier (an index, no hash, no helper call): about a
 * third of what the hash costs per syscall here. */
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, SYSCOUNT_ARRAY_NR);
	__type(key, __u32);
	__type(value, __u64);
} by_nr SEC(".maps");

/* Events not counted because `counts` was full: reported as a health record, so a
 * truncated table never passes for a complete one. */
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, __u64);
} dropped SEC(".maps");

static __always_inline void count_dropped(void)
{
	__u32 zero = 0;
	__u64 *n = bpf_map_lookup_elem(&dropped, &zero);

	if (n)
		*n += 1;
}

static __always_inline int count_syscall(long id)
{
	__u64 pid_tgid = bpf_get_current_pid_tgid();
	struct syscount_key key = {};
	struct syscount_val *val, init = {};

	if (!loupe_filter_pass(pid_tgid))
		return 0;
	/* id is -1 for a syscall number the kernel does not know (ENOSYS path). */
	if (id < 0)
		return 0;

	key.nr = (__u32)id;
	if (targ_per_process) {
		key.tgid = pid_tgid >> 32;
	} else if (key.nr < SYSCOUNT_ARRAY_NR) {
		__u64 *n = bpf_map_lookup_elem(&by_nr, &key.nr);

		if (n)
			*n += 1;
		return 0;
	}

	val = bpf_map_lookup_elem(&counts, &key);
	if (!val) {
		/* On a per-CPU hash a program's update initialises only this CPU's slot. */
		if (targ_per_process)
			bpf_get_current_comm(init.comm, sizeof(init.comm));
		init.count = 1;
		if (bpf_map_update_elem(&counts, &key, &init, BPF_NOEXIST) == 0)
			return 0;
		/* Lost a race with an interrupt-context insert, or the map is full. */
		val = bpf_map_lookup_elem(&counts, &key);
		if (!val) {
			count_dropped();
			return 0;
		}
	}
	val->count += 1;
	return 0;
}

/*
 * One hook, three flavours (user space loads the first the kernel has: sdk/flavour.hpp).
 * The raw ones take the tracepoint's arguments as they are; the classic one runs after the
 * kernel has copied them into a trace record, which is most of what a counter costs here.
 */
SEC("tp_btf/sys_enter")
int BPF_PROG(syscount_sys_enter_btf, struct pt_regs *regs, long id)
{
	return count_syscall(id);
}

SEC("raw_tp/sys_enter")
int syscount_sys_enter_raw(struct bpf_raw_tracepoint_args *ctx)
{
	return count_syscall((long)ctx->args[1]);
}

SEC("tracepoint/raw_syscalls/sys_enter")
int syscount_sys_enter(struct trace_event_raw_sys_enter *ctx)
{
	return count_syscall(ctx->id);
}

char LICENSE[] SEC("license") = "Dual BSD/GPL";
