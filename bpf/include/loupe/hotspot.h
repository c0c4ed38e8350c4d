/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * HotSpot frames in the in-kernel unwinder (unwind_hotspot.bpf.h), read from the VM's own
 * structures: no attach, no signal, no JVM flag. User space (runtimes/hotspot/) reads the
 * Serviceability Agent tables libjvm exports (gHotSpotVMStructs, gHotSpotVMTypes) once per
 * libjvm, and writes one loupe_hotspot_proc per JVM: where its CodeCache is, where the
 * template interpreter's code is, and the offsets the walk needs. The walk then tells an
 * interpreted frame (its Method* and bytecode index), a compiled one (its nmethod and pc)
 * and a stub apart, unwinds each as HotSpot itself does (frame_x86.cpp), and records one
 * runtime frame (loupe/unwind.h) per Java frame. Naming (class, method, line, the methods
 * inlined at a compiled pc) is user space's, from what the walk tells it on first sight.
 *
 * x86-64 only. Shared by BPF and user space; fixed-width fields only.
 */
#ifndef LOUPE_HOTSPOT_H
#define LOUPE_HOTSPOT_H

#ifndef __bpf__
#include <linux/types.h>
#endif

/* A HotSpot runtime frame's payload (LOUPE_RUNTIME_FRAME(LOUPE_RUNTIME_HOTSPOT, payload)):
 * bits 57:56 the kind, the rest by kind.
 *   INTERPRETED: bits 55:44 the bytecode index (LOUPE_HOTSPOT_BCI_UNKNOWN: not known or
 *                past it), bits 43:0 Method* >> 3 (metaspace is below 2^47, 8-aligned).
 *   COMPILED:    bits 55:31 the nmethod's compile id (low 25 bits: tells a freed and
 *                reused nmethod apart), bits 30:0 pc - code_low (the CodeCache is < 2 GiB).
 *   STUB:        bits 30:0 pc - code_low (an adapter, a runtime stub, the call stub). */
#define LOUPE_HOTSPOT_INTERPRETED 0ULL
#define LOUPE_HOTSPOT_COMPILED 1ULL
#define LOUPE_HOTSPOT_STUB 2ULL
#define LOUPE_HOTSPOT_BCI_UNKNOWN 0xfffULL
#define LOUPE_HOTSPOT_KIND(p) (((__u64)(p) >> 56) & 3)
#define LOUPE_HOTSPOT_INTERP(method, bci)                                                          \
	((LOUPE_HOTSPOT_INTERPRETED << 56) | (((__u64)(bci)&0xfffULL) << 44) |                     \
	 (((__u64)(method) >> 3) & ((1ULL << 44) - 1)))
#define LOUPE_HOTSPOT_METHOD(p) (((__u64)(p) & ((1ULL << 44) - 1)) << 3)
#define LOUPE_HOTSPOT_BCI(p) (((__u64)(p) >> 44) & 0xfffULL)
#define LOUPE_HOTSPOT_CODE(kind, compile_id, pc_off)                                               \
	(((__u64)(kind) << 56) | (((__u64)(compile_id)&0x1ffffffULL) << 31) |                      \
	 ((__u64)(pc_off)&0x7fffffffULL))
#define LOUPE_HOTSPOT_COMPILE_ID(p) (((__u64)(p) >> 31) & 0x1ffffffULL)
#define LOUPE_HOTSPOT_PC_OFF(p) ((__u64)(p)&0x7fffffffULL)

/* What the walk tells user space on first sight (loupe_runtime_seen_key.kind), so it reads
 * it while the JVM lives: a Method* (token: its ConstMethod*, which changes when the class
 * is redefined or the metaspace reused), or an nmethod (ptr: the CodeBlob, token: the
 * compile id). */
#define LOUPE_HOTSPOT_SEEN_METHOD 1
#define LOUPE_HOTSPOT_SEEN_NMETHOD 2

#define LOUPE_HOTSPOT_MAX_HEAPS 4
/* Bytes of a CodeBlob read at once; every offset the walk reads is below it. */
#define LOUPE_HOTSPOT_BLOB_BYTES 384

struct loupe_hotspot_heap {
	__u64 low;    /* CodeHeap::_memory._low_boundary: the heap's segment 0 */
	__u64 high;   /* _memory._high_boundary */
	__u64 segmap; /* CodeHeap::_segmap._low_boundary: one byte per segment */
};

/* loupe_hotspot_proc.flags */
#define LOUPE_HOTSPOT_CODE_OFFSETS 1 /* CodeBlob code begin/end are int offsets (JDK 23+) */
#define LOUPE_HOTSPOT_COMPLETE_16 2  /* CodeBlob::_frame_complete_offset is an int16_t (JDK 25) */

/* One JVM, written by user space (runtimes/hotspot/). Offsets are in bytes. */
struct loupe_hotspot_proc {
	__u64 code_low; /* CodeCache::_low_bound, _high_bound: every heap */
	__u64 code_high;
	__u64 interp_low; /* the template interpreter's code (AbstractInterpreter::_code) */
	__u64 interp_high;
	struct loupe_hotspot_heap heaps[LOUPE_HOTSPOT_MAX_HEAPS];
	__u32 n_heaps;
	__u32 flags;	       /* LOUPE_HOTSPOT_* */
	__u16 segment_shift;   /* CodeHeap::_log2_segment_size */
	__u16 heap_block_size; /* sizeof(HeapBlock): the blob follows its block header */
	/* CodeBlob */
	__u16 blob_name;	   /* _name: const char* */
	__u16 blob_code_begin;	   /* _code_begin (a pointer) or _code_offset (an int) */
	__u16 blob_code_end;	   /* _code_end (a pointer) or _data_offset (an int) */
	__u16 blob_frame_complete; /* _frame_complete_offset: int, from code begin */
	__u16 blob_frame_size;	   /* _frame_size: int, in words */
	__u16 nmethod_compile_id;  /* nmethod::_compile_id: int */
	/* Method, ConstMethod: the bytecodes follow the ConstMethod header. */
	__u16 method_const;	 /* Method::_constMethod */
	__u16 const_method_size; /* sizeof(ConstMethod) */
	/* Interpreter frame slots, in words from fp (frame_x86.hpp): Method*, bcp and the
	 * sender's sp (its unextended sp, which a compiled caller's frame size counts from). */
	__s16 interp_method_slot;    /* -3 */
	__s16 interp_bcp_slot;	     /* -8 (JDK 9+) */
	__s16 interp_sender_sp_slot; /* -1 */
	__u16 pad;
};

#endif /* LOUPE_HOTSPOT_H */
