// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/* The floor the latency pair is compared with: programs that do nothing, attached to the
 * same entry/exit hooks in the same run. */
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>

SEC("uprobe")
int empty_uprobe_entry(void *ctx)
{
	return 0;
}

SEC("uretprobe")
int empty_uprobe_exit(void *ctx)
{
	return 0;
}

SEC("tracepoint")
int empty_tp_entry(void *ctx)
{
	return 0;
}

SEC("tracepoint")
int empty_tp_exit(void *ctx)
{
	return 0;
}

/*
 * Floors: what any entry/exit timer must pay at least on these hooks, so the plugin's
 * cost can be read against the unavoidable part, not only against doing nothing.
 *   clock   two clock reads, results kept (a per-CPU sum) so they are not optimized out
 *   tstore  clock + a per-thread slot in task storage + the delta summed: the cheapest
 *           correct pairing the kernel offers
 *   hash    the same with a pid_tgid-keyed hash map, as funclatency and bpftrace do
 */
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, __u64);
} floor_sum SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_TASK_STORAGE);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__type(key, int);
	__type(value, __u64);
} floor_task SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 10240);
	__type(key, __u64);
	__type(value, __u64);
} floor_hash SEC(".maps");

static __always_inline void floor_add(__u64 v)
{
	__u32 zero = 0;
	__u64 *s = bpf_map_lookup_elem(&floor_sum, &zero);

	if (s)
		*s += v;
}

SEC("tracepoint")
int clock_tp_entry(void *ctx)
{
	floor_add(bpf_ktime_get_ns());
	return 0;
}

SEC("tracepoint")
int clock_tp_exit(void *ctx)
{
	floor_add(bpf_ktime_get_ns());
	return 0;
}

SEC("tracepoint")
int tstore_tp_entry(void *ctx)
{
	__u64 *ts = bpf_task_storage_get(&floor_task, bpf_get_current_task_btf(), 0,
					 BPF_LOCAL_STORAGE_GET_F_CREATE);

	if (ts)
		*ts = bpf_ktime_get_ns();
	return 0;
}

SEC("tracepoint")
int tstore_tp_exit(void *ctx)
{
	__u64 *ts = bpf_task_storage_get(&floor_task, bpf_get_current_task_btf(), 0, 0);

	if (ts && *ts) {
		floor_add(bpf_ktime_get_ns() - *ts);
		*ts = 0;
	}
	return 0;
}

SEC("tracepoint")
int hash_tp_entry(void *ctx)
{
	__u64 id = bpf_get_current_pid_tgid(), now = bpf_ktime_get_ns();

	bpf_map_update_elem(&floor_hash, &id, &now, BPF_ANY);
	return 0;
}

SEC("tracepoint")
int hash_tp_exit(void *ctx)
{
	__u64 id = bpf_get_current_pid_tgid();
	__u64 *ts = bpf_map_lookup_elem(&floor_hash, &id);

	if (ts) {
		floor_add(bpf_ktime_get_ns() - *ts);
		bpf_map_delete_elem(&floor_hash, &id);
	}
	return 0;
}

char LICENSE[] SEC("license") = "Dual BSD/GPL";
