/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * The in-kernel unwinder's HotSpot step (included by unwind.bpf.h; not on its own): a frame
 * whose pc lies in a JVM's CodeCache is unwound as HotSpot itself unwinds it
 * (frame_x86.cpp), from the layout user space read out of the VM's own tables
 * (loupe/hotspot.h), and recorded as one runtime frame:
 *
 *   interpreted  pc in the template interpreter's code. fp is the frame's (the interpreter
 *                keeps one): Method* at fp[-3], the bytecode pointer at fp[-8] (in r13 at
 *                the leaf, where it is live), the sender's sp at fp[-1]. The bytecode index
 *                is bcp - (ConstMethod* + sizeof(ConstMethod)): the bytecodes follow it.
 *   compiled     an nmethod (C1, C2, a native wrapper): no frame pointer (C2 takes rbp as a
 *                register), a fixed frame size in words from the blob, the return address
 *                and the caller's rbp on top of it. Recorded by pc and compile id; user
 *                space expands the methods inlined at that pc from the nmethod's scopes.
 *   stub         any other blob (the call stub, runtime stubs, adapters): its frame size,
 *                or the frame pointer when it has none (the call stub's `enter`).
 *
 * The blob holding a pc is found as CodeHeap::find_blob does: the heap's segment map
 * gives, per segment, how far back the block's first segment is (0: here; 0xff: free).
 * A pc that no blob holds, or a frame that cannot be read, ends the walk, counted
 * (hotspot_lost): nothing else can unwind JIT code without frame pointers.
 *
 * Every first sighting of a Method* (token: its ConstMethod*) or of an nmethod (token: its
 * compile id) is told through the runtime ring, so user space names it while the JVM lives.
 */
#ifndef LOUPE_UNWIND_HOTSPOT_BPF_H
#define LOUPE_UNWIND_HOTSPOT_BPF_H

/* Segment map hops before giving up: a tag holds at most 0xfe, and a blob of 4 MiB in
 * 128-byte segments needs 128 hops at worst; HotSpot's own maps stay far shorter. */
#define LOUPE_HOTSPOT_SEGMAP_HOPS 32
/* Bytes between an interpreter frame's fp and its sp the walk accepts: its locals, monitors
 * and expression stack (max_locals alone can be 64k slots; such frames are cut). */
#define LOUPE_HOTSPOT_INTERP_SPAN (256 * 1024)

static __always_inline __s64 loupe_hotspot_s32(const struct loupe_unwind_state *st, __u32 off)
{
	if (off > LOUPE_HOTSPOT_BLOB_BYTES - sizeof(__s32))
		return 0;
	return *(const __s32 *)&st->hs_buf[off];
}

static __always_inline __u64 loupe_hotspot_u64(const struct loupe_unwind_state *st, __u32 off)
{
	if (off > LOUPE_HOTSPOT_BLOB_BYTES - sizeof(__u64))
		return 0;
	return *(const __u64 *)&st->hs_buf[off];
}

/* The CodeBlob holding pc, or 0. */
static __always_inline __u64 loupe_hotspot_blob(struct loupe_unwind_state *st, __u64 pc)
{
	const struct loupe_hotspot_heap *h = NULL;
	__u64 seg;
	__u8 tag;

	for (int i = 0; i < LOUPE_HOTSPOT_MAX_HEAPS; i++) {
		if (i >= st->hs.n_heaps)
			break;
		if (pc >= st->hs.heaps[i].low && pc < st->hs.heaps[i].high) {
			h = &st->hs.heaps[i];
			break;
		}
	}
	if (!h || st->hs.segment_shift > 20)
		return 0;
	seg = (pc - h->low) >> st->hs.segment_shift;
	for (int i = 0; i < LOUPE_HOTSPOT_SEGMAP_HOPS; i++) {
		if (bpf_probe_read_user(&tag, 1, (void *)(h->segmap + seg)))
			return 0;
		if (tag == 0xff)
			return 0; /* a free block */
		if (tag == 0)
			return h->low + (seg << st->hs.segment_shift) + st->hs.heap_block_size;
		if (tag > seg)
			return 0;
		seg -= tag;
	}
	return 0;
}

static __always_inline void loupe_hotspot_tell(struct loupe_unwind_state *st, __u16 kind, __u64 ptr,
					       __u64 token)
{
	st->seen_key.tgid = st->tgid;
	st->seen_key.runtime = LOUPE_RUNTIME_HOTSPOT;
	st->seen_key.kind = kind;
	st->seen_key.ptr = ptr;
	st->seen_key.token = token;
	loupe_runtime_tell(st);
}

/* An interpreted frame at pc: its Method* and bytecode index, and the caller's registers
 * into *ra, *sp, *bp. False when the frame cannot be read. */
static __always_inline bool loupe_hotspot_interpreted(struct loupe_unwind_state *st, __u64 *payload,
						      __u64 *ra, __u64 *sp, __u64 *bp)
{
	__u64 fp = st->bp, method, bcp, cm, sender, bci = LOUPE_HOTSPOT_BCI_UNKNOWN;
	__s64 lo = -72, slot;

	/* fp[-9] .. fp[1]: Method*, the bcp, the sender's sp, the saved fp and the return
	 * address, in one read into the blob buffer (unused for this frame). */
	if (fp <= st->sp || fp - st->sp > LOUPE_HOTSPOT_INTERP_SPAN ||
	    bpf_probe_read_user(st->hs_buf, 88, (void *)(fp + lo)))
		return false;
	slot = (__s64)st->hs.interp_method_slot * 8 - lo;
	method = (slot >= 0 && slot <= 80) ? *(__u64 *)&st->hs_buf[slot & 0x7f] : 0;
	slot = (__s64)st->hs.interp_bcp_slot * 8 - lo;
	bcp = (slot >= 0 && slot <= 80) ? *(__u64 *)&st->hs_buf[slot & 0x7f] : 0;
	slot = (__s64)st->hs.interp_sender_sp_slot * 8 - lo;
	sender = (slot >= 0 && slot <= 80) ? *(__u64 *)&st->hs_buf[slot & 0x7f] : 0;
	*bp = *(__u64 *)&st->hs_buf[72];
	*ra = *(__u64 *)&st->hs_buf[80];
	if (st->nat == 0)
		bcp = st->leaf_r13; /* live in r13 while the leaf runs; saved only at calls */
	if (!method || bpf_probe_read_user(&cm, sizeof(cm), (void *)(method + st->hs.method_const)))
		return false;
	if (bcp >= cm + st->hs.const_method_size &&
	    bcp - (cm + st->hs.const_method_size) < LOUPE_HOTSPOT_BCI_UNKNOWN)
		bci = bcp - (cm + st->hs.const_method_size);
	*payload = LOUPE_HOTSPOT_INTERP(method, bci);
	loupe_hotspot_tell(st, LOUPE_HOTSPOT_SEEN_METHOD, method, cm);
	/* The caller's sp is this frame's sender sp (its unextended sp: a compiled caller's
	 * frame size counts from it), or just above the saved fp and return address. */
	*sp = sender >= fp + 16 && sender - fp < LOUPE_HOTSPOT_INTERP_SPAN ? sender : fp + 16;
	return true;
}

/* The Java frame at the walk's pc, which lies in the CodeCache: recorded at depth d, and
 * the walk moved to its caller. 1 ends the walk (the frame could not be unwound). A global
 * function: the verifier checks it once, not in every state of the walk's callback. */
__attribute__((noinline)) int loupe_hotspot_step(__u32 d)
{
	__u32 zero = 0;
	struct loupe_unwind_state *st = bpf_map_lookup_elem(&loupe_unwind_scratch, &zero);
	__u64 pc, blob, name = 0, begin, payload, ra = 0, sp, bp, cfa, off;
	__s64 frame_words, complete;
	__u32 ret, kind;

	if (!st || d >= LOUPE_UNWIND_MAX_DEPTH)
		return 1;
	pc = st->pc;
	sp = st->sp;
	bp = st->bp;
	ret = st->nat > 0;
	/* A return address is the instruction after the call: its PcDesc is the call's, found
	 * by user space as the first at or after the recorded offset + 1. */
	off = pc - st->hs.code_low - ret;
	if (pc >= st->hs.interp_low && pc < st->hs.interp_high) {
		if (!loupe_hotspot_interpreted(st, &payload, &ra, &sp, &bp))
			goto lost;
		goto record;
	}
	blob = loupe_hotspot_blob(st, pc);
	if (!blob || bpf_probe_read_user(st->hs_buf, LOUPE_HOTSPOT_BLOB_BYTES, (void *)blob))
		goto lost;
	if (bpf_probe_read_user(&name, 4, (void *)loupe_hotspot_u64(st, st->hs.blob_name)))
		goto lost;
	/* "Interpreter": the interpreter's blob, where user space found no range for it. */
	if ((__u32)name == 0x65746e49) {
		if (!loupe_hotspot_interpreted(st, &payload, &ra, &sp, &bp))
			goto lost;
		goto record;
	}
	if (st->hs.flags & LOUPE_HOTSPOT_CODE_OFFSETS)
		begin = blob + loupe_hotspot_s32(st, st->hs.blob_code_begin);
	else
		begin = loupe_hotspot_u64(st, st->hs.blob_code_begin);
	frame_words = loupe_hotspot_s32(st, st->hs.blob_frame_size);
	complete = loupe_hotspot_s32(st, st->hs.blob_frame_complete);
	if (st->hs.flags & LOUPE_HOTSPOT_COMPLETE_16)
		complete = (__s16)complete;
	/* "nmethod", "native nmethod": compiled Java. */
	kind = ((__u32)name == 0x74656d6e || (__u32)name == 0x6974616e) ? LOUPE_HOTSPOT_COMPILED
									: LOUPE_HOTSPOT_STUB;
	if (kind == LOUPE_HOTSPOT_COMPILED) {
		__s64 id = loupe_hotspot_s32(st, st->hs.nmethod_compile_id);

		payload = LOUPE_HOTSPOT_CODE(LOUPE_HOTSPOT_COMPILED, id, off);
		loupe_hotspot_tell(st, LOUPE_HOTSPOT_SEEN_NMETHOD, blob, (__u64)id);
	} else {
		payload = LOUPE_HOTSPOT_CODE(LOUPE_HOTSPOT_STUB, 0, off);
	}
	if (frame_words > 0 && frame_words < 65536 &&
	    (ret || complete < 0 || pc >= begin + complete)) {
		/* A built frame: the return address and the caller's rbp sit on top of it. */
		cfa = sp + frame_words * 8;
		if (!loupe_unwind_read(st, &st->pair[1], cfa - 8) ||
		    !loupe_unwind_read(st, &st->pair[0], cfa - 16))
			goto lost;
		ra = st->pair[1];
		bp = st->pair[0];
		sp = cfa;
	} else if (!ret) {
		/* The leaf before its frame is built, or a stub that builds none: the return
		 * address is what the call pushed. */
		if (!loupe_unwind_read(st, &st->pair[1], sp))
			goto lost;
		ra = st->pair[1];
		sp += 8;
	} else {
		/* A stub with a frame pointer on the stack (the call stub's `enter`). */
		if (bp <= sp || !loupe_unwind_read(st, &st->pair[0], bp) ||
		    !loupe_unwind_read(st, &st->pair[1], bp + 8))
			goto lost;
		sp = bp + 16;
		ra = st->pair[1];
		bp = st->pair[0];
	}
record:
	/* d again: the compiler spilled it across the reads above, and the verifier lost its
	 * bound with the spill. */
	asm volatile("" : "+r"(d));
	if (d >= LOUPE_UNWIND_MAX_DEPTH)
		return 1;
	st->stack.addrs[d] = LOUPE_RUNTIME_FRAME(LOUPE_RUNTIME_HOTSPOT, payload);
	st->depth = d + 1;
	st->hash = (st->hash ^ st->stack.addrs[d]) * 0x100000001b3ULL;
	st->hs_frames++;
	st->nat++;
	return loupe_unwind_to_caller(st, ra, sp, bp) ? 1 : 0;
lost:
	/* The pc itself, so the stack still says where it stopped (a JIT frame by address). */
	asm volatile("" : "+r"(d));
	if (d >= LOUPE_UNWIND_MAX_DEPTH)
		return 1;
	st->stack.addrs[d] = pc;
	st->depth = d + 1;
	st->hash = (st->hash ^ pc) * 0x100000001b3ULL;
	st->hs_lost = 1;
	st->stop = LOUPE_UNWIND_STOP_HOTSPOT;
	st->done = 1;
	return 1;
}

#endif /* LOUPE_UNWIND_HOTSPOT_BPF_H */
