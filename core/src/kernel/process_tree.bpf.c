// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * The session's process tree: the target and every descendant, kept from fork and exit.
 * The core loads this object before any plugin starts and hands its loupe_tree map to
 * every plugin (loupe_session_info.tree_map_fd); their filters read it
 * (bpf/include/loupe/filter.bpf.h). Three flavours of the same two hooks; user space
 * keeps one (tp_btf, else raw_tp, else classic tracepoints).
 *
 * Processes are keyed by tgid; a thread joins with its process. The classic tracepoint
 * flavour sees only the child's thread id, so there a new thread of a process in the tree
 * gets an entry of its own too (removed when that thread exits): harmless for the filter,
 * but it takes room in the map.
 */
#include "vmlinux.h"
#include <bpf/bpf_core_read.h>
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>

#include "loupe/tree.h"

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 16384); /* user space sets the session's bound */
	__type(key, __u32);
	__type(value, struct loupe_tree_entry);
} loupe_tree SEC(".maps");

/* Fork and exit events of processes in the tree, for user space (symbol caches). */
struct {
	__uint(type, BPF_MAP_TYPE_RINGBUF);
	__uint(max_entries, 64 * 1024);
} tree_events SEC(".maps");

/* Counters user space reads through the mmaped .bss. */
__u64 tree_joined = 0;	    /* processes that joined the tree by fork */
__u64 tree_left = 0;	    /* processes of the tree whose last thread exited */
__u64 tree_overflow = 0;    /* forks of tree members not tracked: the map was full */
__u64 tree_events_lost = 0; /* events user space did not get (ring full) */

static __always_inline void emit(__u32 kind, __u32 tgid, __u32 parent)
{
	struct loupe_tree_event *ev;

	ev = bpf_ringbuf_reserve(&tree_events, sizeof(*ev), 0);
	if (!ev) {
		__sync_fetch_and_add(&tree_events_lost, 1);
		return;
	}
	ev->kind = kind;
	ev->tgid = tgid;
	ev->parent_tgid = parent;
	ev->reserved = 0;
	bpf_ringbuf_submit(ev, 0);
}

/* In the parent's context: `child` (a tgid, or a thread id for classic tracepoints). */
static __always_inline int on_fork(__u32 child)
{
	__u32 parent = bpf_get_current_pid_tgid() >> 32;
	struct loupe_tree_entry *pe, ce = {};

	if (child == parent)
		return 0; /* a new thread of a process already in the tree */
	pe = bpf_map_lookup_elem(&loupe_tree, &parent);
	if (!pe)
		return 0;
	ce.parent_tgid = parent;
	ce.depth = pe->depth + 1;
	if (bpf_map_update_elem(&loupe_tree, &child, &ce, BPF_ANY) != 0) {
		__sync_fetch_and_add(&tree_overflow, 1);
		return 0;
	}
	__sync_fetch_and_add(&tree_joined, 1);
	emit(LOUPE_TREE_FORK, child, parent);
	return 0;
}

/* In the exiting thread's context. The process leaves when its last thread does. */
static __always_inline int on_exit(void)
{
	__u64 id = bpf_get_current_pid_tgid();
	__u32 tgid = id >> 32, tid = (__u32)id;
	struct task_struct *task = (struct task_struct *)bpf_get_current_task();
	struct loupe_tree_entry *e;
	__u32 parent;

	if (tid != tgid)
		bpf_map_delete_elem(&loupe_tree,
				    &tid); /* classic tracepoints: a thread's own entry */
	if (BPF_CORE_READ(task, signal, live.counter) != 0)
		return 0; /* other threads live on */
	e = bpf_map_lookup_elem(&loupe_tree, &tgid);
	if (!e)
		return 0;
	parent = e->parent_tgid;
	if (bpf_map_delete_elem(&loupe_tree, &tgid) != 0)
		return 0; /* another thread's exit got there first */
	__sync_fetch_and_add(&tree_left, 1);
	emit(LOUPE_TREE_EXIT, tgid, parent);
	return 0;
}

/* TP_PROTO(struct task_struct *parent, struct task_struct *child) */
SEC("tp_btf/sched_process_fork")
int tree_btf_fork(unsigned long long *ctx)
{
	struct task_struct *child = (struct task_struct *)ctx[1];

	return on_fork(child->tgid);
}

SEC("tp_btf/sched_process_exit")
int tree_btf_exit(unsigned long long *ctx)
{
	return on_exit();
}

SEC("raw_tp/sched_process_fork")
int tree_raw_fork(struct bpf_raw_tracepoint_args *ctx)
{
	struct task_struct *child = (struct task_struct *)ctx->args[1];

	return on_fork(BPF_CORE_READ(child, tgid));
}

SEC("raw_tp/sched_process_exit")
int tree_raw_exit(struct bpf_raw_tracepoint_args *ctx)
{
	return on_exit();
}

SEC("tracepoint/sched/sched_process_fork")
int tree_tp_fork(struct trace_event_raw_sched_process_fork *ctx)
{
	return on_fork(ctx->child_pid);
}

SEC("tracepoint/sched/sched_process_exit")
int tree_tp_exit(void *ctx)
{
	return on_exit();
}

char LICENSE[] SEC("license") = "Dual BSD/GPL";
