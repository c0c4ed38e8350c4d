/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * Process filters every profiler shares, as read-only knobs set before load
 * (zero = no filter). The verifier then prunes the branches of unset filters.
 */
#ifndef LOUPE_FILTER_BPF_H
#define LOUPE_FILTER_BPF_H

#include <bpf/bpf_helpers.h>

const volatile __u32 loupe_filter_tgid = 0;
const volatile __u32 loupe_filter_tid = 0;
const volatile __u64 loupe_filter_cgroup = 0; /* cgroup v2 id */
const volatile char loupe_filter_comm[16] = {};
const volatile bool loupe_filter_comm_on = false;

static __always_inline bool loupe_comm_matches(void)
{
	char comm[16];

	bpf_get_current_comm(comm, sizeof(comm));
#pragma unroll
	for (int i = 0; i < 16; i++) {
		if (comm[i] != loupe_filter_comm[i])
			return false;
		if (comm[i] == 0)
			break;
	}
	return true;
}

/* True when the current task passes every configured filter. */
static __always_inline bool loupe_filter_pass(__u64 pid_tgid)
{
	if (loupe_filter_tgid && (__u32)(pid_tgid >> 32) != loupe_filter_tgid)
		return false;
	if (loupe_filter_tid && (__u32)pid_tgid != loupe_filter_tid)
		return false;
	if (loupe_filter_cgroup && bpf_get_current_cgroup_id() != loupe_filter_cgroup)
		return false;
	if (loupe_filter_comm_on && !loupe_comm_matches())
		return false;
	return true;
}

#endif /* LOUPE_FILTER_BPF_H */
