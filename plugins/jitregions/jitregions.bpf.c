// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * JIT region tracking: executable memory appearing (mmap/mprotect with PROT_EXEC),
 * losing PROT_EXEC or going away (mprotect/munmap), from the syscall tracepoints; and a
 * cpu-clock sampler that sends the user instruction pointer of tracked processes, so user
 * space can attribute samples to regions in the order they happened (one ring for both).
 */
#include "vmlinux.h"
#include <bpf/bpf_core_read.h>
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>

#include "loupe/emit.bpf.h"
#include "loupe/filter.bpf.h"
#include "jitregions.h"

#define PROT_EXEC 0x4
#define MAP_FIXED 0x10
#define MAP_ANONYMOUS 0x20

/* Also track file-backed executable mappings (every shared library load). */
const volatile bool targ_file_backed = false;

LOUPE_RING(events, 1024 * 1024);

/* Processes with executable regions (value unused); samples of others are not sent. */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 4096);
	__type(key, __u32);
	__type(value, __u8);
} procs SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 4096);
	__type(key, __u32);
	__type(value, struct jr_pending);
} pending SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct jr_counters);
} counters SEC(".maps");

static __always_inline struct jr_counters *ctrs(void)
{
	__u32 zero = 0;

	return bpf_map_lookup_elem(&counters, &zero);
}

static __always_inline bool tracked(__u32 tgid)
{
	return bpf_map_lookup_elem(&procs, &tgid) != NULL;
}

static __always_inline void track(__u32 tgid)
{
	__u8 one = 1;

	if (bpf_map_update_elem(&procs, &tgid, &one, BPF_ANY)) {
		struct jr_counters *c = ctrs();

		if (c)
			c->procs_full++;
	}
}

static __always_inline struct jr_event *reserve(__u32 kind, __u64 id)
{
	struct jr_event *e = LOUPE_RESERVE(events, struct jr_event, JR_RECORD, JR_RECORD_VERSION);

	if (!e)
		return NULL;
	e->boot_ns = bpf_ktime_get_boot_ns();
	e->kind = kind;
	e->tgid = id >> 32;
	e->tid = (__u32)id;
	e->prot = 0;
	e->addr = 0;
	e->length = 0;
	e->flags = 0;
	e->fd = -1;
	e->in_kernel = 0;
	e->pad = 0;
	bpf_get_current_comm(e->comm, sizeof(e->comm));
	return e;
}

static __always_inline void stash(__u32 kind, __u64 addr, __u64 length, __u32 prot, __u32 flags,
				  __s32 fd)
{
	__u64 id = bpf_get_current_pid_tgid();
	__u32 tid = (__u32)id;
	struct jr_pending p = {
	    .addr = addr,
	    .length = length,
	    .prot = prot,
	    .flags = flags,
	    .fd = fd,
	    .kind = kind,
	};

	if (bpf_map_update_elem(&pending, &tid, &p, BPF_ANY)) {
		struct jr_counters *c = ctrs();

		if (c)
			c->pending_full++;
	}
}

static __always_inline int finish(long ret)
{
	__u64 id = bpf_get_current_pid_tgid();
	__u32 tid = (__u32)id;
	struct jr_pending *p = bpf_map_lookup_elem(&pending, &tid);
	struct jr_event *e;

	if (!p)
		return 0;
	if (ret < 0 && ret > -4096)
		goto out; /* the syscall failed: nothing changed */
	e = reserve(p->kind, id);
	if (!e)
		goto out;
	e->addr = p->kind == JR_MMAP ? (__u64)ret : p->addr;
	e->length = p->length;
	e->prot = p->prot;
	e->flags = p->flags;
	e->fd = p->fd;
	if (p->prot & PROT_EXEC)
		track(id >> 32);
	LOUPE_SUBMIT(events, e);
out:
	bpf_map_delete_elem(&pending, &tid);
	return 0;
}

SEC("tracepoint/syscalls/sys_enter_mmap")
int jr_mmap_enter(struct trace_event_raw_sys_enter *ctx)
{
	__u64 id = bpf_get_current_pid_tgid();
	__u32 prot = ctx->args[2], flags = ctx->args[3];
	bool exec = prot & PROT_EXEC;

	if (!loupe_filter_pass(id))
		return 0;
	if (exec && !(flags & MAP_ANONYMOUS) && !targ_file_backed)
		return 0;
	/* A fixed mapping without PROT_EXEC may replace a tracked region. */
	if (!exec && !((flags & MAP_FIXED) && tracked(id >> 32)))
		return 0;
	stash(JR_MMAP, ctx->args[0], ctx->args[1], prot, flags, (__s32)ctx->args[4]);
	return 0;
}

SEC("tracepoint/syscalls/sys_exit_mmap")
int jr_mmap_exit(struct trace_event_raw_sys_exit *ctx)
{
	return finish(ctx->ret);
}

static __always_inline int mprotect_enter(struct trace_event_raw_sys_enter *ctx)
{
	__u64 id = bpf_get_current_pid_tgid();
	__u32 prot = ctx->args[2];

	if (!loupe_filter_pass(id))
		return 0;
	if (!(prot & PROT_EXEC) && !tracked(id >> 32))
		return 0;
	stash(JR_MPROTECT, ctx->args[0], ctx->args[1], prot, 0, -1);
	return 0;
}

SEC("tracepoint/syscalls/sys_enter_mprotect")
int jr_mprotect_enter(struct trace_event_raw_sys_enter *ctx)
{
	return mprotect_enter(ctx);
}

SEC("tracepoint/syscalls/sys_exit_mprotect")
int jr_mprotect_exit(struct trace_event_raw_sys_exit *ctx)
{
	return finish(ctx->ret);
}

/* V8 flips code pages with protection keys where the CPU has them. */
SEC("tracepoint/syscalls/sys_enter_pkey_mprotect")
int jr_pkey_mprotect_enter(struct trace_event_raw_sys_enter *ctx)
{
	return mprotect_enter(ctx);
}

SEC("tracepoint/syscalls/sys_exit_pkey_mprotect")
int jr_pkey_mprotect_exit(struct trace_event_raw_sys_exit *ctx)
{
	return finish(ctx->ret);
}

SEC("tracepoint/syscalls/sys_enter_munmap")
int jr_munmap_enter(struct trace_event_raw_sys_enter *ctx)
{
	__u64 id = bpf_get_current_pid_tgid();

	if (!tracked(id >> 32))
		return 0;
	stash(JR_MUNMAP, ctx->args[0], ctx->args[1], 0, 0, -1);
	return 0;
}

SEC("tracepoint/syscalls/sys_exit_munmap")
int jr_munmap_exit(struct trace_event_raw_sys_exit *ctx)
{
	return finish(ctx->ret);
}

SEC("tracepoint/sched/sched_process_exit")
int jr_process_exit(void *ctx)
{
	__u64 id = bpf_get_current_pid_tgid();
	__u32 tgid = id >> 32;
	__u32 tid = (__u32)id;
	struct jr_event *e;

	bpf_map_delete_elem(&pending, &tid);
	if (tgid != tid || !tracked(tgid))
		return 0;
	bpf_map_delete_elem(&procs, &tgid);
	e = reserve(JR_EXIT, id);
	if (e)
		LOUPE_SUBMIT(events, e);
	return 0;
}

SEC("tracepoint/sched/sched_process_exec")
int jr_process_exec(void *ctx)
{
	__u64 id = bpf_get_current_pid_tgid();
	__u32 tgid = id >> 32;
	struct jr_event *e;

	if (!tracked(tgid))
		return 0;
	bpf_map_delete_elem(&procs, &tgid);
	e = reserve(JR_EXEC, id);
	if (e)
		LOUPE_SUBMIT(events, e);
	return 0;
}

static __always_inline bool sampled_in_kernel(struct bpf_perf_event_data *ctx)
{
#if defined(__TARGET_ARCH_x86)
	/* The context allows only 8-byte loads; cs sits in the low bits of its word. */
	__u64 cs = *(volatile __u64 *)((char *)ctx +
				       __builtin_offsetof(struct bpf_perf_event_data, regs.cs));

	return (cs & 3) == 0;
#elif defined(__TARGET_ARCH_arm64)
	return (ctx->regs.pstate & 0xf) != 0;
#else
	return false;
#endif
}

SEC("perf_event")
int jr_sample(struct bpf_perf_event_data *ctx)
{
	__u64 id = bpf_get_current_pid_tgid();
	__u32 tgid = id >> 32;
	struct jr_counters *c;
	struct jr_event *e;
	__u64 ip = 0;

	if ((__u32)id == 0)
		return 0;
	/* With a target process every sample of it counts (the attributed share needs the
	 * total); system-wide only processes that installed executable memory. */
	if (!tracked(tgid) && !(loupe_filter_tgid && loupe_filter_pass(id)))
		return 0;
	c = ctrs();
	/* The user-mode IP even when the sample hit the kernel on the task's behalf. */
	if (bpf_get_stack(ctx, &ip, sizeof(ip), BPF_F_USER_STACK) <= 0 || !ip) {
		if (c)
			c->samples_no_user++;
		return 0;
	}
	e = reserve(JR_SAMPLE, id);
	if (!e)
		return 0;
	e->addr = ip;
	e->in_kernel = sampled_in_kernel(ctx);
	LOUPE_SUBMIT(events, e);
	if (c)
		c->samples++;
	return 0;
}

char LICENSE[] SEC("license") = "Dual BSD/GPL";
