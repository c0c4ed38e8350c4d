// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/* Test-only producer: each getppid() of the target process emits `targ_burst` records into
 * a small ring as fast as the CPU allows, through the same emit helper plugins use. Every
 * attempt is counted, so user space can check produced = delivered + each counted loss. */
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include <loupe/emit.bpf.h>
#include "flood.h"

const volatile __u32 targ_tgid = 0;
const volatile __u32 targ_burst = 16;
const volatile __u32 targ_malformed_every = 0; /* every Nth record gets a wrong version */

LOUPE_RING(flood_ring, 64 * 1024); /* resized by the plugin before load */

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 2);
	__type(key, __u32);
	__type(value, __u64);
} flood_counts SEC(".maps");

static __always_inline __u64 count(__u32 slot)
{
	__u64 *v = bpf_map_lookup_elem(&flood_counts, &slot);

	if (!v)
		return 0;
	*v += 1;
	return *v;
}

SEC("tracepoint/syscalls/sys_enter_getppid")
int flood_getppid(void *ctx)
{
	__u32 tgid = bpf_get_current_pid_tgid() >> 32;
	struct flood_record *r;
	__u64 seq;

	if (targ_tgid && tgid != targ_tgid)
		return 0;
	for (__u32 i = 0; i < FLOOD_MAX_BURST; i++) {
		if (i >= targ_burst)
			break;
		seq = count(FLOOD_ATTEMPTS);
		if (loupe_sampled_out(&flood_ring_divisor)) {
			count(FLOOD_SAMPLED_OUT);
			continue;
		}
		r = LOUPE_RESERVE(flood_ring, struct flood_record, FLOOD_RECORD_TYPE,
				  FLOOD_RECORD_VERSION);
		if (!r)
			continue;
		r->seq = seq;
		r->tgid = tgid;
		r->key = i % FLOOD_KEYS;
		if (targ_malformed_every && seq % targ_malformed_every == 0)
			r->version = FLOOD_RECORD_VERSION + 1;
		LOUPE_SUBMIT(flood_ring, r);
	}
	return 0;
}

char LICENSE[] SEC("license") = "Dual BSD/GPL";
