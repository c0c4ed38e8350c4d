// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * Allocation stacks and outstanding memory: uprobes on the libc allocator (entry learns
 * the size and the stack, return learns the address) and, optionally, the kmem
 * tracepoints for kernel memory. Per site: allocations, bytes, frees; per live
 * allocation: size, site and time, so what was never freed is the leak report.
 */
#include "vmlinux.h"
#include <bpf/bpf_core_read.h>
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>

#include "loupe/filter.bpf.h"
#include "loupe/emit.bpf.h"
#include "loupe/hist.bpf.h"
#include "loupe/map.bpf.h"
#include "loupe/unwind.bpf.h"
#include "loupe/ustack.bpf.h"
#include "memalloc.h"

#define E2BIG 7
#define EEXIST 17

const volatile __u32 targ_sample_every = 0; /* 1-in-N; 0 or 1 = every allocation */
const volatile __u64 targ_sample_bytes = 0; /* Poisson mean bytes between samples; 0 = off */
const volatile bool targ_kernel_user_stacks = true; /* user stack of kmem allocations too */
const volatile __u64 targ_page_size = 4096;
/* unwind = "dwarf": user allocation stacks are copies unwound in user space. */
const volatile bool targ_dwarf = false;
/* unwind = "tables": user stacks by the in-kernel unwinder (ids in loupe_unwind_stacks). */
const volatile bool targ_unwind_tables = false;

struct {
	__uint(type, BPF_MAP_TYPE_STACK_TRACE);
	__uint(max_entries, 16384);
	__uint(key_size, sizeof(__u32));
	__uint(value_size, MA_STACK_DEPTH * sizeof(__u64));
} stacks SEC(".maps");

/* Per-site totals; max_entries is the site limit (overflow counted in stats_full). */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 16384);
	__type(key, struct ma_stack_key);
	__type(value, struct ma_stack_stats);
} sites SEC(".maps");

/* Live allocations; max_entries bounds the leak report (overflow counted). */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 131072);
	__type(key, struct ma_alloc_key);
	__type(value, struct ma_alloc_info);
} outstanding SEC(".maps");

/* Allocator calls in flight, by thread. */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 16384);
	__type(key, __u64);
	__type(value, struct ma_pending);
} pending SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct ma_counters);
} counters SEC(".maps");

/* First user stack of each traced process: user space symbolizes it at once, while the
 * process is alive, so its address space is known when the final report comes (often
 * after the process exited). */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 4096); /* max_processes */
	__type(key, __u32);
	__type(value, __s32);
} seen_pids SEC(".maps");

/* The first stack of a process not seen before: tell user space to read its mappings. */
static __always_inline void note_process(__u32 tgid, __s32 user_stack_id, struct ma_counters *c)
{
	if (user_stack_id < 0 || bpf_map_lookup_elem(&seen_pids, &tgid))
		return;
	/* -EEXIST: another thread of it made it first. */
	if (bpf_map_update_elem(&seen_pids, &tgid, &user_stack_id, BPF_NOEXIST) &&
	    !bpf_map_lookup_elem(&seen_pids, &tgid))
		c->processes_full++;
}

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct loupe_hist);
} sizes SEC(".maps");

/* Exponential quantiles (mean targ_sample_bytes) written by user space before attach:
 * BPF has no floating point to draw -ln(U) * mean itself. */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, MA_EXP_TABLE);
	__type(key, __u32);
	__type(value, __u64);
} exp_table SEC(".maps");

/* Bytes left until the next Poisson sample point, per CPU: the process is memoryless, so
 * one countdown per CPU samples every byte with the same probability. 0 = not drawn yet. */
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, __u64);
} countdown SEC(".maps");

static __always_inline struct ma_counters *get_counters(void)
{
	__u32 zero = 0;

	return bpf_map_lookup_elem(&counters, &zero);
}

static __always_inline __u64 draw_exp(void)
{
	__u32 idx = bpf_get_prandom_u32() & (MA_EXP_TABLE - 1);
	__u64 *v = bpf_map_lookup_elem(&exp_table, &idx);

	return v && *v ? *v : 1;
}

/* Whether this allocation of `size` bytes is recorded. */
static __always_inline bool sample(__u64 size, struct ma_counters *c)
{
	__u32 zero = 0;
	__u64 *left;

	if (targ_sample_bytes) {
		left = bpf_map_lookup_elem(&countdown, &zero);
		if (!left)
			return true;
		if (*left == 0)
			*left = draw_exp();
		if (*left > size) {
			*left -= size;
			c->sampled_out++;
			return false;
		}
		*left = draw_exp();
		return true;
	}
	if (targ_sample_every > 1 && bpf_get_prandom_u32() % targ_sample_every) {
		c->sampled_out++;
		return false;
	}
	return true;
}

static __always_inline __s32 get_stack(void *ctx, __u64 flags, struct ma_counters *c)
{
	long id;

	/* The unwinder walks from the user registers saved at the trap or syscall, which a
	 * uretprobe has set to the caller's return address and stack: the allocation site,
	 * then its callers by their own CFI rows (a store that is full is counted there). */
	if (targ_unwind_tables && (flags & BPF_F_USER_STACK)) {
		id = loupe_unwind_user_stack();
		if (id < 0)
			c->user_stack_failed++;
		return (__s32)id;
	}
	id = bpf_get_stackid(ctx, &stacks, flags);

	if (id < 0) {
		if (id == -EEXIST)
			c->stack_collisions++;
		else if (flags & BPF_F_USER_STACK)
			c->user_stack_failed++;
		else
			c->kernel_stack_failed++;
	}
	return (__s32)id;
}

static __always_inline void record_alloc(__u64 addr, __u32 tgid, __u64 size,
					 struct ma_stack_key *key, struct ma_counters *c)
{
	struct ma_alloc_key akey = {.addr = addr, .tgid = tgid, .origin = key->origin};
	struct ma_alloc_info info = {.size = size, .stack = *key};
	struct ma_stack_stats *st, zero_stats = {};
	struct loupe_hist *h;
	__u32 zero = 0;

	st = loupe_lookup_or_init(&sites, key, &zero_stats);
	if (!st)
		c->stats_full++;
	else {
		__sync_fetch_and_add(&st->allocs, 1);
		__sync_fetch_and_add(&st->bytes, size);
	}
	h = bpf_map_lookup_elem(&sizes, &zero);
	if (h)
		loupe_hist_add(h, size, false);
	info.ts_ns = bpf_ktime_get_ns();
	if (bpf_map_update_elem(&outstanding, &akey, &info, BPF_ANY))
		c->outstanding_full++;
}

/* unwind = "dwarf": one ring for the sampled allocations (with their stack copies) and
 * their frees, in order; user space shrinks it when off. */
LOUPE_RING(dwarf_events, 4 * 1024 * 1024);
LOUPE_USTACK_SCRATCH(dwarf_scratch, struct ma_dwarf_alloc);

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, __u64);
} dwarf_seq SEC(".maps");

/* The sampled allocation's number (31 bits, wrapping) and its stack copy to user space;
 * -1 when it could not be sent (then it is not tracked: a free would find no site). */
static __always_inline __s32 send_dwarf_alloc(struct pt_regs *ctx, __u32 tgid, __u64 size)
{
	struct ma_dwarf_alloc *r = loupe_ustack_scratch(&dwarf_scratch);
	__u32 zero = 0;
	__u64 *next, size_rec;
	__s32 seq;

	next = bpf_map_lookup_elem(&dwarf_seq, &zero);
	if (!r || !next)
		return -1;
	seq = (__s32)(__sync_fetch_and_add(next, 1) & 0x7fffffff);
	r->h.type = MA_RECORD_DWARF;
	r->h.version = MA_RECORD_DWARF_VERSION;
	r->h.tgid = tgid;
	r->h.seq = (__u32)seq;
	r->h.size = size;
	r->us.stack_len = 0;
	r->us.flags = 0;
	if (loupe_ustack_regs_pt(ctx, &r->us))
		loupe_ustack_copy(&r->us, (__u8 *)(r + 1));
	size_rec = loupe_ustack_record_len(sizeof(*r), &r->us);
	r->h.len = size_rec;
	if (loupe_output(&dwarf_events, &dwarf_events_lost, r, size_rec))
		return -1;
	return seq;
}

static __always_inline void send_dwarf_free(__u32 tgid, __u32 seq, __u64 size)
{
	struct ma_dwarf_free *f = LOUPE_RESERVE(dwarf_events, struct ma_dwarf_free, MA_RECORD_DWARF,
						MA_RECORD_DWARF_VERSION);

	if (!f)
		return; /* counted in dwarf_events_lost */
	f->tgid = tgid;
	f->seq = seq;
	f->size = size;
	LOUPE_SUBMIT(dwarf_events, f);
}

/* Returns false when the address was not being tracked. */
static __always_inline bool record_free(__u64 addr, __u32 tgid, __u32 origin)
{
	struct ma_alloc_key akey = {.addr = addr, .tgid = tgid, .origin = origin};
	struct ma_alloc_info *info;
	struct ma_stack_stats *st;

	info = bpf_map_lookup_elem(&outstanding, &akey);
	if (!info)
		return false;
	if (info->stack.kernel_stack_id == MA_DWARF_SEQ) {
		send_dwarf_free(tgid, (__u32)info->stack.user_stack_id, info->size);
		bpf_map_delete_elem(&outstanding, &akey);
		return true;
	}
	st = bpf_map_lookup_elem(&sites, &info->stack);
	if (st) {
		__sync_fetch_and_add(&st->frees, 1);
		__sync_fetch_and_add(&st->freed_bytes, info->size);
	}
	bpf_map_delete_elem(&outstanding, &akey);
	return true;
}

/* ---- user space allocator ------------------------------------------------------- */

static __always_inline int alloc_enter(struct pt_regs *ctx, __u32 func, __u64 size, __u64 arg_ptr)
{
	__u64 pid_tgid = bpf_get_current_pid_tgid();
	struct ma_pending v = {}, *p;
	struct ma_counters *c;

	if (!loupe_filter_pass(pid_tgid))
		return 0;
	c = get_counters();
	if (!c)
		return 0;
	if (func < MA_NR_FUNCS)
		c->calls[func]++;
	p = bpf_map_lookup_elem(&pending, &pid_tgid);
	/* realloc(NULL, n) calls malloc, aligned_alloc calls memalign...: the outer call
	 * is the one the program asked for, the inner one is not a second allocation. */
	if (p && p->depth) {
		p->depth++;
		c->nested++;
		return 0;
	}
	v.size = size;
	v.arg_ptr = arg_ptr;
	v.func = func;
	v.depth = 1;
	v.sampled = sample(size, c);
	if (bpf_map_update_elem(&pending, &pid_tgid, &v, BPF_ANY))
		c->pending_full++;
	return 0;
}

SEC("uretprobe")
int BPF_KRETPROBE(ma_alloc_exit, long ret)
{
	__u64 pid_tgid = bpf_get_current_pid_tgid();
	struct ma_stack_key key = {};
	struct ma_counters *c;
	struct ma_pending *p, v;
	__u32 tgid = pid_tgid >> 32;
	__u64 addr = 0;

	if (!loupe_filter_pass(pid_tgid))
		return 0;
	c = get_counters();
	if (!c)
		return 0;
	p = bpf_map_lookup_elem(&pending, &pid_tgid);
	if (!p || !p->depth) {
		c->unmatched_returns++;
		return 0;
	}
	if (p->depth > 1) {
		p->depth--;
		return 0;
	}
	v = *p;
	bpf_map_delete_elem(&pending, &pid_tgid);

	if (v.func == MA_POSIX_MEMALIGN) {
		if (ret == 0 && v.arg_ptr)
			bpf_probe_read_user(&addr, sizeof(addr), (void *)v.arg_ptr);
	} else {
		addr = (__u64)ret;
	}
	if (v.func == MA_REALLOC && v.arg_ptr && (addr || v.size == 0)) {
		/* realloc moved or freed the old block (a failed realloc keeps it). */
		record_free(v.arg_ptr, tgid, MA_ORIGIN_USER);
		c->realloc_frees++;
	}
	if (!addr) {
		if (!(v.func == MA_REALLOC && v.size == 0))
			c->failed++;
		return 0;
	}
	if (!v.sampled)
		return 0;
	/* The stack is taken here, not at entry: at entry the frame pointer still is the
	 * caller's, so a frame-pointer walk skips the caller itself (kernels that add the
	 * return address at function entry only do so for a push %rbp / endbr64 there). At
	 * return the leaf is the caller's call site. */
	key.tgid = tgid;
	key.origin = MA_ORIGIN_USER;
	if (targ_dwarf) {
		struct ma_alloc_key akey = {.addr = addr, .tgid = tgid, .origin = MA_ORIGIN_USER};
		struct ma_alloc_info info = {.size = v.size};
		struct loupe_hist *h;
		__u32 zero = 0;
		__s32 seq = send_dwarf_alloc(ctx, tgid, v.size);

		if (seq < 0)
			return 0;
		h = bpf_map_lookup_elem(&sizes, &zero);
		if (h)
			loupe_hist_add(h, v.size, false);
		info.ts_ns = bpf_ktime_get_ns();
		info.stack.tgid = tgid;
		info.stack.user_stack_id = seq;
		info.stack.kernel_stack_id = MA_DWARF_SEQ;
		info.stack.origin = MA_ORIGIN_USER;
		if (bpf_map_update_elem(&outstanding, &akey, &info, BPF_ANY))
			c->outstanding_full++;
		return 0;
	}
	key.user_stack_id = get_stack(ctx, BPF_F_USER_STACK, c);
	key.kernel_stack_id = -1;
	record_alloc(addr, tgid, v.size, &key, c);
	note_process(tgid, key.user_stack_id, c);
	return 0;
}

SEC("uprobe")
int BPF_KPROBE(ma_malloc, __u64 size)
{
	return alloc_enter(ctx, MA_MALLOC, size, 0);
}

SEC("uprobe")
int BPF_KPROBE(ma_calloc, __u64 n, __u64 size)
{
	return alloc_enter(ctx, MA_CALLOC, n * size, 0);
}

SEC("uprobe")
int BPF_KPROBE(ma_realloc, void *ptr, __u64 size)
{
	return alloc_enter(ctx, MA_REALLOC, size, (__u64)ptr);
}

SEC("uprobe")
int BPF_KPROBE(ma_posix_memalign, void **memptr, __u64 align, __u64 size)
{
	return alloc_enter(ctx, MA_POSIX_MEMALIGN, size, (__u64)memptr);
}

SEC("uprobe")
int BPF_KPROBE(ma_aligned_alloc, __u64 align, __u64 size)
{
	return alloc_enter(ctx, MA_ALIGNED_ALLOC, size, 0);
}

SEC("uprobe")
int BPF_KPROBE(ma_memalign, __u64 align, __u64 size)
{
	return alloc_enter(ctx, MA_MEMALIGN, size, 0);
}

SEC("uprobe")
int BPF_KPROBE(ma_valloc, __u64 size)
{
	return alloc_enter(ctx, MA_VALLOC, size, 0);
}

SEC("uprobe")
int BPF_KPROBE(ma_pvalloc, __u64 size)
{
	return alloc_enter(ctx, MA_PVALLOC, size, 0);
}

SEC("uprobe")
int BPF_KPROBE(ma_free, void *ptr)
{
	__u64 pid_tgid = bpf_get_current_pid_tgid();
	struct ma_counters *c;

	if (!ptr || !loupe_filter_pass(pid_tgid))
		return 0;
	c = get_counters();
	if (!c)
		return 0;
	c->frees++;
	if (!record_free((__u64)ptr, pid_tgid >> 32, MA_ORIGIN_USER))
		c->frees_untracked++;
	return 0;
}

/* ---- kernel memory (kmem tracepoints) -------------------------------------------- */

static __always_inline int kernel_alloc(void *ctx, __u64 addr, __u64 size, __u32 origin)
{
	__u64 pid_tgid = bpf_get_current_pid_tgid();
	struct ma_stack_key key = {};
	struct task_struct *task;
	struct ma_counters *c;

	if (!addr || !loupe_filter_pass(pid_tgid))
		return 0;
	c = get_counters();
	if (!c)
		return 0;
	c->kernel_allocs++;
	if (!sample(size, c))
		return 0;
	key.tgid = pid_tgid >> 32;
	key.origin = origin;
	key.kernel_stack_id = get_stack(ctx, 0, c);
	key.user_stack_id = -1;
	task = (struct task_struct *)bpf_get_current_task();
	/* Kernel threads have no user stack: not a failure. */
	if (targ_kernel_user_stacks && BPF_CORE_READ(task, mm))
		key.user_stack_id = get_stack(ctx, BPF_F_USER_STACK, c);
	record_alloc(addr, 0, size, &key, c);
	note_process(key.tgid, key.user_stack_id, c);
	return 0;
}

/* Frees are not filtered by process: memory a traced task allocated is often freed by
 * another (RCU callbacks, kworkers). Untracked frees are the norm here, so not counted. */
static __always_inline int kernel_free(__u64 addr, __u32 origin)
{
	struct ma_counters *c;

	if (!addr || !record_free(addr, 0, origin))
		return 0;
	c = get_counters();
	if (c)
		c->kernel_frees++;
	return 0;
}

SEC("tracepoint/kmem/kmalloc")
int ma_kmalloc(struct trace_event_raw_kmalloc *ctx)
{
	return kernel_alloc(ctx, (__u64)BPF_CORE_READ(ctx, ptr), BPF_CORE_READ(ctx, bytes_alloc),
			    MA_ORIGIN_KMALLOC);
}

SEC("tracepoint/kmem/kmem_cache_alloc")
int ma_kmem_cache_alloc(struct trace_event_raw_kmem_cache_alloc *ctx)
{
	return kernel_alloc(ctx, (__u64)BPF_CORE_READ(ctx, ptr), BPF_CORE_READ(ctx, bytes_alloc),
			    MA_ORIGIN_KMALLOC);
}

SEC("tracepoint/kmem/kfree")
int ma_kfree(struct trace_event_raw_kfree *ctx)
{
	return kernel_free((__u64)BPF_CORE_READ(ctx, ptr), MA_ORIGIN_KMALLOC);
}

SEC("tracepoint/kmem/kmem_cache_free")
int ma_kmem_cache_free(struct trace_event_raw_kmem_cache_free *ctx)
{
	return kernel_free((__u64)BPF_CORE_READ(ctx, ptr), MA_ORIGIN_KMALLOC);
}

SEC("tracepoint/kmem/mm_page_alloc")
int ma_page_alloc(struct trace_event_raw_mm_page_alloc *ctx)
{
	__u64 pfn = BPF_CORE_READ(ctx, pfn);

	/* pfn is -1UL when the allocation failed. */
	if (pfn == (__u64)-1)
		return 0;
	return kernel_alloc(ctx, pfn, targ_page_size << BPF_CORE_READ(ctx, order), MA_ORIGIN_PAGE);
}

SEC("tracepoint/kmem/mm_page_free")
int ma_page_free(struct trace_event_raw_mm_page_free *ctx)
{
	return kernel_free(BPF_CORE_READ(ctx, pfn), MA_ORIGIN_PAGE);
}

char LICENSE[] SEC("license") = "Dual BSD/GPL";
