/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * Process filters every profiler shares, as read-only knobs set before load
 * (zero = no filter). The verifier then prunes the branches of unset filters.
 *
 * The session's process tree: `loupe_tree` is the core's map of every process of the
 * target's tree (the target and its descendants, tracked from fork/exit by the core,
 * core/src/kernel/process_tree.bpf.c). Each plugin object declares it with one entry;
 * the SDK's write_target_filter() makes it reuse the core's map (bpf_map__reuse_fd
 * before load, which takes the core map's size) and sets loupe_filter_tree, so the tgid
 * test becomes "is in the tree". Without a tree (system-wide, --no-follow, an old host)
 * the knob stays false and the 1-entry map is never read.
 */
#ifndef LOUPE_FILTER_BPF_H
#define LOUPE_FILTER_BPF_H

#include <bpf/bpf_helpers.h>

#include "loupe/tree.h"

const volatile __u32 loupe_filter_tgid = 0;
const volatile __u32 loupe_filter_tid = 0;
const volatile __u64 loupe_filter_cgroup = 0; /* cgroup v2 id */
const volatile char loupe_filter_comm[16] = {};
const volatile bool loupe_filter_comm_on = false;
const volatile bool loupe_filter_tree = false; /* tgid test = membership of loupe_tree */
/* loupe's own process, left out of a system-wide session: its ring readers, symbolizer
 * and session loop are the profiler, not the profiled (0 = none). */
const volatile __u32 loupe_filter_not_tgid = 0;

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 1); /* the core's map replaces it (bpf_map__reuse_fd) */
	__type(key, __u32);	/* tgid */
	__type(value, struct loupe_tree_entry);
} loupe_tree SEC(".maps");

/* True when `tgid` is in the session's process tree. */
static __always_inline bool loupe_in_tree(__u32 tgid)
{
	return bpf_map_lookup_elem(&loupe_tree, &tgid) != NULL;
}

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
	if (loupe_filter_tree) {
		if (!loupe_in_tree((__u32)(pid_tgid >> 32)))
			return false;
	} else if (loupe_filter_tgid && (__u32)(pid_tgid >> 32) != loupe_filter_tgid) {
		return false;
	}
	if (loupe_filter_not_tgid && (__u32)(pid_tgid >> 32) == loupe_filter_not_tgid)
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
