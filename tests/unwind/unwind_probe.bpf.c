// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * The in-kernel unwinder (loupe/unwind.bpf.h) at sched_switch, where offcpu takes its
 * stacks: each switch-out of the target process's threads counted by (thread, table stack,
 * frame-pointer stack).
 */
#include "vmlinux.h"
#include <bpf/bpf_core_read.h>
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>

#include "loupe/unwind.bpf.h"
#include "unwind_probe.h"

struct {
	__uint(type, BPF_MAP_TYPE_STACK_TRACE);
	__uint(max_entries, 1024);
	__uint(key_size, sizeof(__u32));
	__uint(value_size, LOUPE_UNWIND_MAX_DEPTH * sizeof(__u64));
} fp_stacks SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 4096);
	__type(key, struct up_key);
	__type(value, __u64);
} switches SEC(".maps");

/* The target's tgid, set after its tables are loaded (0: none yet). */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, __u32);
} target SEC(".maps");

SEC("tp_btf/sched_switch")
int BPF_PROG(up_switch, bool preempt, struct task_struct *prev)
{
	__u64 id = bpf_get_current_pid_tgid(), one = 1, *n;
	struct up_key k = {};
	__u32 zero = 0, *tgid = bpf_map_lookup_elem(&target, &zero);

	if (!tgid || *tgid == 0 || (id >> 32) != *tgid)
		return 0;
	k.tid = (__u32)id;
	k.table_id = loupe_unwind_user_stack();
	k.fp_id = bpf_get_stackid(ctx, &fp_stacks, BPF_F_USER_STACK);
	n = bpf_map_lookup_elem(&switches, &k);
	if (n)
		__sync_fetch_and_add(n, 1);
	else
		bpf_map_update_elem(&switches, &k, &one, BPF_NOEXIST);
	return 0;
}

char LICENSE[] SEC("license") = "Dual BSD/GPL";
