// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/* Producers for bench/dispatch: the same tracepoint either emits `targ_burst` ring records
 * per hit through the loupe emit helper, or aggregates them in the kernel (a per-CPU
 * counter per key), so the two costs compare one for one. */
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include <loupe/emit.bpf.h>

#define BENCH_RECORD_TYPE 0x6201
#define BENCH_MAX_BURST 64

struct bench_record {
	struct loupe_rec_hdr hdr;
	__u64 seq;
	__u32 tgid;
	__u32 key;
};

const volatile __u32 targ_tgid = 0;
const volatile __u32 targ_burst = 1;

LOUPE_RING(bench_ring, 16 * 1024 * 1024);

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 8);
	__type(key, __u32);
	__type(value, __u64);
} bench_counts SEC(".maps");

SEC("tracepoint/syscalls/sys_enter_getppid")
int bench_emit(void *ctx)
{
	__u32 tgid = bpf_get_current_pid_tgid() >> 32;
	struct bench_record *r;

	if (targ_tgid && tgid != targ_tgid)
		return 0;
	for (__u32 i = 0; i < BENCH_MAX_BURST; i++) {
		if (i >= targ_burst)
			break;
		r = LOUPE_RESERVE(bench_ring, struct bench_record, BENCH_RECORD_TYPE, 1);
		if (!r)
			continue;
		r->seq = i;
		r->tgid = tgid;
		r->key = i & 7;
		LOUPE_SUBMIT(bench_ring, r);
	}
	return 0;
}

SEC("tracepoint/syscalls/sys_enter_getppid")
int bench_aggregate(void *ctx)
{
	__u32 tgid = bpf_get_current_pid_tgid() >> 32;
	__u64 *v;

	if (targ_tgid && tgid != targ_tgid)
		return 0;
	for (__u32 i = 0; i < BENCH_MAX_BURST; i++) {
		__u32 key = i & 7;

		if (i >= targ_burst)
			break;
		v = bpf_map_lookup_elem(&bench_counts, &key);
		if (v)
			*v += 1;
	}
	return 0;
}

char LICENSE[] SEC("license") = "Dual BSD/GPL";
