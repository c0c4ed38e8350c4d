/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * The in-kernel unwinder's V8 step (included by unwind.bpf.h; not on its own). A frame of
 * a V8 process whose pc no row covers (JIT code, the embedded builtins) is unwound by its
 * frame pointer, as before; this step only decides what the frame is (loupe/v8.h):
 *
 *   JavaScript  fp[context] is a tagged Context and fp[function] a JSFunction (its map's
 *               instance type says so, as does its SharedFunctionInfo's): recorded as one
 *               runtime frame of that function, instead of the pc. A bytecode handler or
 *               a builtin that builds no frame runs in its JavaScript caller's frame, so
 *               the frame at rbp is that function's.
 *   typed       fp[context] is a small integer, V8's frame-type marker (entry, exit, stub,
 *               internal): the pc stays, named from the binary's Builtins_* symbols.
 *
 * The tier: interpreted when the pc is the interpreter's (the embedded builtins) and the
 * frame holds a bytecode offset; optimized when the pc lies in the Maglev or TurboFan code
 * the function holds (recorded by code and pc: user space expands the functions inlined
 * there); compiled, by function only, otherwise (baseline code, on-stack replacement).
 */
#ifndef LOUPE_UNWIND_V8_BPF_H
#define LOUPE_UNWIND_V8_BPF_H

/* The instance type of the heap object `tagged` (a tagged pointer), or 0. Read into the
 * scratch, not the BPF stack: 6.1 bounds the whole call chain's stack at 512 bytes. */
static __always_inline __u16 loupe_v8_type(struct loupe_unwind_state *st, __u64 tagged)
{
	if ((tagged & 3) != 1 ||
	    bpf_probe_read_user(&st->v8_word[0], 8, (void *)(tagged - 1 + st->v8.off_map)) ||
	    (st->v8_word[0] & 3) != 1 ||
	    bpf_probe_read_user(&st->v8_word[1], 2,
				(void *)(st->v8_word[0] - 1 + st->v8.off_instance_type)))
		return 0;
	return (__u16)st->v8_word[1];
}

/* The frame just recorded (its pc, unwound by the frame pointer next): made a
 * JavaScript frame when it is one. Four reads a JavaScript frame: its slots below fp at
 * once, the function's map and the map's type, the SharedFunctionInfo (whose type user
 * space checks when it reads it). A global function: verified once, on its own. */
__attribute__((noinline)) int loupe_v8_frame(void)
{
	__u32 zero = 0;
	struct loupe_unwind_state *st = bpf_map_lookup_elem(&loupe_unwind_scratch, &zero);
	__u32 d;
	__u64 fp, ctx, fn, sfi = 0, slot, frame, tier = LOUPE_V8_COMPILED,
			   offset = LOUPE_V8_OFFSET_UNKNOWN;
	__s64 lo, at;
	__u16 type;

	if (!st)
		return 0;
	d = st->depth - 1; /* the frame the walk just recorded */
	if (d >= LOUPE_UNWIND_MAX_DEPTH)
		return 0;
	fp = st->bp;
	/* A frame pointer into this stack, above sp: anything else is not a V8 frame. */
	if (fp <= st->sp || fp - st->sp > (1 << 20))
		return 0;
	/* The slots, fp + lo up to fp: the lowest is the bytecode offset's. */
	lo = st->v8.fp_bytecode_offset;
	if (lo < -(__s64)sizeof(st->v8_slots) || lo >= 0 ||
	    bpf_probe_read_user(st->v8_slots, sizeof(st->v8_slots), (void *)(fp + lo)))
		return 0;
	at = st->v8.fp_context - lo;
	if (at < 0 || at > (__s64)sizeof(st->v8_slots) - 8)
		return 0;
	ctx = *(__u64 *)&st->v8_slots[at & 0x3f];
	/* A typed frame's marker is a small integer (low bit 0): V8's own frame, pc kept. */
	if ((ctx & 1) == 0)
		return 0;
	at = st->v8.fp_function - lo;
	if (at < 0 || at > (__s64)sizeof(st->v8_slots) - 8)
		return 0;
	fn = *(__u64 *)&st->v8_slots[at & 0x3f];
	type = loupe_v8_type(st, fn);
	if (!type || type < st->v8.type_jsfunction_first || type > st->v8.type_jsfunction_last)
		return 0;
	st->v8_word[1] = 0;
	if (bpf_probe_read_user(&st->v8_word[1], 8, (void *)(fn - 1 + st->v8.off_shared)))
		return 0;
	sfi = st->v8_word[1];
	if ((sfi & 3) != 1)
		return 0;
	/* Interpreted: the pc is the interpreter's (the builtins' code), and the frame holds a
	 * bytecode offset (a small integer; compiled code's frames hold something else there). */
	slot = *(__u64 *)&st->v8_slots[0];
	if (st->pc >= st->v8.blob_low && st->pc < st->v8.blob_high && (slot & 1) == 0) {
		__s64 off = (__s32)(slot >> 32) - (__s64)st->v8.bytecode_offset_bias;

		tier = LOUPE_V8_INTERPRETED;
		if (off >= 0 && off < (__s64)LOUPE_V8_OFFSET_UNKNOWN)
			offset = (__u64)off;
	}
	sfi -= 1;
	frame = LOUPE_V8_FRAME(tier, offset, sfi);
	st->seen_key.kind = LOUPE_V8_SEEN_SFI;
	st->seen_key.ptr = sfi;
	st->seen_key.token = 0;
	/* Optimized code that is the function's own (on-stack-replaced code is not: the
	 * function does not hold it, and its pc falls outside): by pc, so that user space
	 * finds the functions inlined there. Two reads: the code, its start, kind and size. */
	if (tier == LOUPE_V8_COMPILED && st->v8.off_code &&
	    !bpf_probe_read_user(&st->v8_word[0], 8, (void *)(fn - 1 + st->v8.off_code)) &&
	    (st->v8_word[0] & 3) == 1 &&
	    !bpf_probe_read_user(st->v8_slots, 24,
				 (void *)(st->v8_word[0] - 1 + st->v8.off_code_start))) {
		__u64 start = *(__u64 *)&st->v8_slots[0];
		__u32 flags = *(__u32 *)&st->v8_slots[st->v8.code_flags_at & 0x1f];
		__u32 size = *(__u32 *)&st->v8_slots[st->v8.code_size_at & 0x1f];
		/* A caller's pc is its return address: the call is the byte before. */
		__u64 pc = st->pc - (d > 0 ? 1 : 0);

		if ((flags & st->v8.code_kind_mask) != st->v8.code_kind_baseline &&
		    (start & 63) == 0 && pc >= start && pc - start < size &&
		    pc - start <= LOUPE_V8_CODE_OFFSET_MAX) {
			frame = LOUPE_V8_CODE_FRAME(start, pc - start);
			st->seen_key.kind = LOUPE_V8_SEEN_CODE;
			st->seen_key.ptr = st->v8_word[0] - 1;
			st->seen_key.token = sfi;
		}
	}
	/* d again: spilled across the reads above, its bound lost with the spill. */
	asm volatile("" : "+r"(d));
	if (d >= LOUPE_UNWIND_MAX_DEPTH)
		return 0;
	st->stack.addrs[d] = LOUPE_RUNTIME_FRAME(LOUPE_RUNTIME_V8, frame);
	st->hash = (st->hash_before ^ st->stack.addrs[d]) * 0x100000001b3ULL;
	st->v8_frames++;
	st->seen_key.tgid = st->tgid;
	st->seen_key.runtime = LOUPE_RUNTIME_V8;
	loupe_runtime_tell(st);
	return 1;
}

#endif /* LOUPE_UNWIND_V8_BPF_H */
