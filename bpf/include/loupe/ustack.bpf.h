/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * Copying user registers and a slice of the user stack for DWARF unwinding in user space
 * (perf --call-graph dwarf style; the record layout is loupe/ustack.h).
 *
 * The stack of a record is copied into a per-CPU scratch value (the BPF stack is 512
 * bytes) and sent with bpf_ringbuf_output() at the length actually copied, so a shallow
 * stack costs a shallow record. The copy goes page by page from sp: user stacks end at a
 * page boundary, and bpf_probe_read_user() fails a whole read that crosses into an
 * unmapped or non-resident page, so the first fault ends the slice at the last good page
 * instead of losing it all.
 *
 * Usage, for a record type `struct rec { ...; struct loupe_ustack us; }` (us last):
 *
 *   LOUPE_USTACK_SCRATCH(scratch, struct rec);
 *   struct rec *r = loupe_ustack_scratch(&scratch);
 *   if (r && loupe_ustack_regs_perf(ctx, &r->us))   // or _regs_pt (uprobe), _regs_task
 *           size = sizeof(*r) + loupe_ustack_copy(&r->us, (__u8 *)(r + 1));
 *
 * loupe_ustack_stack_bytes (rodata, set before load) is the slice size, at most
 * LOUPE_USTACK_MAX_BYTES. Counters: loupe_ustack_stats (per-CPU, key 0).
 */
#ifndef LOUPE_USTACK_BPF_H
#define LOUPE_USTACK_BPF_H

#include <bpf/bpf_core_read.h>
#include <bpf/bpf_helpers.h>

#include "loupe/ustack.h"

const volatile __u32 loupe_ustack_stack_bytes = LOUPE_USTACK_DEFAULT_BYTES;

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct loupe_ustack_counters);
} loupe_ustack_stats SEC(".maps");

/* A per-CPU scratch value holding one record of `rec_type` and the largest slice. */
#define LOUPE_USTACK_SCRATCH(name, rec_type)                                                       \
	struct {                                                                                   \
		__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);                                           \
		__uint(max_entries, 1);                                                            \
		__type(key, __u32);                                                                \
		__uint(value_size,                                                                 \
		       sizeof(rec_type) + LOUPE_USTACK_MAX_BYTES + LOUPE_USTACK_CHUNK);            \
	} name SEC(".maps")

static __always_inline void *loupe_ustack_scratch(void *map)
{
	__u32 zero = 0;

	return bpf_map_lookup_elem(map, &zero);
}

static __always_inline struct loupe_ustack_counters *loupe_ustack_counters(void)
{
	__u32 zero = 0;

	return bpf_map_lookup_elem(&loupe_ustack_stats, &zero);
}

#if defined(__TARGET_ARCH_x86)

/* pt_regs (x86-64) into DWARF order: `LOAD(field)` reads one pt_regs field. Contexts
 * allow only direct loads at constant offsets, hence a loader per kind of source. */
#define LOUPE_USTACK_FROM_REGS(us, LOAD)                                                           \
	do {                                                                                       \
		(us)->regs[0] = LOAD(ax);                                                          \
		(us)->regs[1] = LOAD(dx);                                                          \
		(us)->regs[2] = LOAD(cx);                                                          \
		(us)->regs[3] = LOAD(bx);                                                          \
		(us)->regs[4] = LOAD(si);                                                          \
		(us)->regs[5] = LOAD(di);                                                          \
		(us)->regs[6] = LOAD(bp);                                                          \
		(us)->regs[7] = LOAD(sp);                                                          \
		(us)->regs[8] = LOAD(r8);                                                          \
		(us)->regs[9] = LOAD(r9);                                                          \
		(us)->regs[10] = LOAD(r10);                                                        \
		(us)->regs[11] = LOAD(r11);                                                        \
		(us)->regs[12] = LOAD(r12);                                                        \
		(us)->regs[13] = LOAD(r13);                                                        \
		(us)->regs[14] = LOAD(r14);                                                        \
		(us)->regs[15] = LOAD(r15);                                                        \
		(us)->regs[16] = LOAD(ip);                                                         \
	} while (0)

/* The current task's user registers as saved on kernel entry (kprobes, tracepoints, a
 * perf sample taken in kernel mode). The pt_regs are read into the record's stack area,
 * which the copy overwrites next, so no BPF stack is spent on them. False for kernel
 * threads (no user side). */
static __always_inline bool loupe_ustack_regs_task(struct loupe_ustack *us)
{
	struct task_struct *task = bpf_get_current_task_btf();
	struct pt_regs *saved = (struct pt_regs *)(us + 1);
	struct loupe_ustack_counters *c = loupe_ustack_counters();

	if (!BPF_CORE_READ(task, mm) ||
	    bpf_probe_read_kernel(saved, sizeof(*saved), (void *)bpf_task_pt_regs(task))) {
		if (c)
			c->no_regs++;
		return false;
	}
#define LOUPE_SAVED_REG(f) (saved->f)
	LOUPE_USTACK_FROM_REGS(us, LOUPE_SAVED_REG);
#undef LOUPE_SAVED_REG
	us->flags = LOUPE_USTACK_F_TASK_REGS;
	return true;
}

/* A uprobe's context: the registers are the user's. */
static __always_inline bool loupe_ustack_regs_pt(struct pt_regs *ctx, struct loupe_ustack *us)
{
#define LOUPE_PT_CTX_REG(f)                                                                        \
	(*(volatile __u64 *)((char *)ctx + __builtin_offsetof(struct pt_regs, f)))
	LOUPE_USTACK_FROM_REGS(us, LOUPE_PT_CTX_REG);
#undef LOUPE_PT_CTX_REG
	us->flags = 0;
	return true;
}

/* A perf_event sample: the interrupted registers when it hit user mode, else the task's
 * saved user registers (perf's perf_get_regs_user() rule). */
static __always_inline bool loupe_ustack_regs_perf(struct bpf_perf_event_data *ctx,
						   struct loupe_ustack *us)
{
	/* The context allows only 8-byte loads; cs sits in the low bits of its word. */
	__u64 cs = *(volatile __u64 *)((char *)ctx +
				       __builtin_offsetof(struct bpf_perf_event_data, regs.cs));

	if ((cs & 3) == 0)
		return loupe_ustack_regs_task(us);
#define LOUPE_PERF_CTX_REG(f)                                                                      \
	(*(volatile __u64 *)((char *)ctx + __builtin_offsetof(struct bpf_perf_event_data, regs.f)))
	LOUPE_USTACK_FROM_REGS(us, LOUPE_PERF_CTX_REG);
#undef LOUPE_PERF_CTX_REG
	us->flags = 0;
	return true;
}

#endif /* __TARGET_ARCH_x86 */

/* Copies up to loupe_ustack_stack_bytes from regs[SP] into `dst` (the bytes right after
 * `us` in a LOUPE_USTACK_SCRATCH value); sets stack_len and flags, counts, returns the
 * length. */
static __always_inline __u32 loupe_ustack_copy(struct loupe_ustack *us, __u8 *dst)
{
	struct loupe_ustack_counters *c = loupe_ustack_counters();
	__u64 sp = us->regs[LOUPE_USTACK_REG_SP];
	__u64 want = loupe_ustack_stack_bytes;
	__u64 off = 0, first;

	if (want > LOUPE_USTACK_MAX_BYTES)
		want = LOUPE_USTACK_MAX_BYTES;
	/* First the rest of sp's page, then whole pages: a fault can only start at a page.
	 * Unrolled, each chunk's start depends on `first` alone (no loop-carried offset):
	 * 6.1's verifier derived impossible bounds for a carried one and refused the
	 * program. */
	first = LOUPE_USTACK_CHUNK - (sp & (LOUPE_USTACK_CHUNK - 1));
#pragma unroll
	for (int i = 0; i < LOUPE_USTACK_MAX_BYTES / LOUPE_USTACK_CHUNK + 1; i++) {
		__u64 start = i == 0 ? 0 : first + (__u64)(i - 1) * LOUPE_USTACK_CHUNK;
		__u64 chunk = i == 0 ? first : LOUPE_USTACK_CHUNK;

		if (start >= want)
			break;
		if (chunk > want - start)
			chunk = want - start;
		/* Bounds the verifier can follow: start < MAX, 0 < chunk <= CHUNK; the scratch
		 * value has MAX + CHUNK bytes after `us`. */
		asm volatile("" : "+r"(start), "+r"(chunk));
		start &= LOUPE_USTACK_MAX_BYTES - 1;
		if (chunk > LOUPE_USTACK_CHUNK || chunk == 0)
			break;
		if (bpf_probe_read_user(dst + start, chunk, (void *)(sp + start)))
			break;
		off = start + chunk;
	}
	us->stack_len = (__u32)off;
	if (c) {
		if (off == 0)
			c->copy_failed++;
		else
			c->captured++;
		if (off < want)
			c->short_copy++;
		c->bytes += off;
	}
	if (off == 0)
		us->flags |= LOUPE_USTACK_F_COPY_FAILED;
	else if (off < want)
		us->flags |= LOUPE_USTACK_F_SHORT;
	return off;
}

/* The length of a record of `head` bytes (its struct loupe_ustack last) with the slice
 * copied after it, in a form the verifier can bound for bpf_ringbuf_output(). */
static __always_inline __u64 loupe_ustack_record_len(__u64 head, const struct loupe_ustack *us)
{
	__u64 len = head + (us->stack_len & (LOUPE_USTACK_MAX_BYTES * 2 - 1));

	if (len > head + LOUPE_USTACK_MAX_BYTES)
		len = head + LOUPE_USTACK_MAX_BYTES;
	return len;
}

#endif /* LOUPE_USTACK_BPF_H */
