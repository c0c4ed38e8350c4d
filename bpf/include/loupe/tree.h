/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * The session's process tree, shared by the core's tracker (BPF and user space) and every
 * plugin's BPF filter (filter.bpf.h). Key: tgid (__u32). Plain C, no kernel headers, so
 * both BPF and C++ include it.
 */
#ifndef LOUPE_TREE_H
#define LOUPE_TREE_H

#ifdef __cplusplus
#include <cstdint>
typedef std::uint32_t loupe_tree_u32;
#else
typedef __u32 loupe_tree_u32;
#endif

/* The value of one process in the tree map. */
struct loupe_tree_entry {
	loupe_tree_u32 parent_tgid; /* 0 for the root and for processes seeded from /proc */
	loupe_tree_u32 depth;	    /* 0 = the session's target */
};

/* What the tracker tells user space (its ring buffer). */
enum loupe_tree_event_kind {
	LOUPE_TREE_FORK = 1, /* tgid joined the tree */
	LOUPE_TREE_EXIT = 2, /* tgid's last thread exited; it left the tree */
};

struct loupe_tree_event {
	loupe_tree_u32 kind; /* enum loupe_tree_event_kind */
	loupe_tree_u32 tgid;
	loupe_tree_u32 parent_tgid;
	loupe_tree_u32 reserved;
};

#endif /* LOUPE_TREE_H */
