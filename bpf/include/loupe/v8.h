/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * V8's JavaScript frames (Node.js) in the in-kernel unwinder (unwind_v8.bpf.h), read from
 * the VM's own structures: no --perf-basic-prof, no restart. node exports V8's postmortem
 * metadata (the v8dbg_* symbols: frame slots, object field offsets, instance types);
 * user space (runtimes/v8/) reads it once per binary and writes one loupe_v8_proc per
 * process. V8 keeps a frame pointer in every frame of its code, so the walk reaches JS
 * frames by the frame-pointer chain already; the step only looks at each frame the rows
 * do not cover: its context slot tells a JavaScript frame (a Context) from one of V8's
 * typed frames (a small-integer marker: entry, exit, stub), and a JavaScript frame's
 * function slot gives its JSFunction, whose SharedFunctionInfo stands for the function.
 * Naming (name, script, line) is user space's, from what the walk tells it on first sight.
 *
 * x86-64, builds without pointer compression (Node's default). Shared by BPF and user
 * space; fixed-width fields only.
 */
#ifndef LOUPE_V8_H
#define LOUPE_V8_H

#ifndef __bpf__
#include <linux/types.h>
#endif

/* A V8 runtime frame's payload (LOUPE_RUNTIME_FRAME(LOUPE_RUNTIME_V8, payload)), by tier
 * (bits 57:56). Interpreted and compiled: bits 55:44 the bytecode offset of an interpreted
 * frame (LOUPE_V8_OFFSET_UNKNOWN: not known, or past it), bits 43:0 the
 * SharedFunctionInfo's address >> 3 (heap objects are 8-aligned, below 2^47). Optimized:
 * the code the frame runs and where in it, so that user space finds the functions inlined
 * there (the code's source positions and deoptimization data): bits 55:15 the code's
 * instruction start >> 6 (V8 aligns code to 64 bytes on x86-64), bits 14:0 the pc's
 * offset in it (the call's, for a caller: its return address - 1). */
#define LOUPE_V8_INTERPRETED 0ULL /* Ignition: the bytecode offset is the frame's */
#define LOUPE_V8_COMPILED 1ULL	  /* Sparkplug, Maglev or TurboFan code, by function only */
#define LOUPE_V8_OPTIMIZED 2ULL	  /* Maglev or TurboFan code the function's own: by pc */
#define LOUPE_V8_CODE_OFFSET_MAX 0x7fffULL
#define LOUPE_V8_CODE_FRAME(start, offset)                                                         \
	((LOUPE_V8_OPTIMIZED << 56) | ((((__u64)(start) >> 6) & ((1ULL << 41) - 1)) << 15) |       \
	 ((__u64)(offset)&LOUPE_V8_CODE_OFFSET_MAX))
#define LOUPE_V8_CODE_START(p) ((((__u64)(p) >> 15) & ((1ULL << 41) - 1)) << 6)
#define LOUPE_V8_CODE_OFFSET(p) ((__u64)(p)&LOUPE_V8_CODE_OFFSET_MAX)
#define LOUPE_V8_OFFSET_UNKNOWN 0xfffULL
#define LOUPE_V8_FRAME(tier, offset, sfi)                                                          \
	((((__u64)(tier)&3ULL) << 56) | (((__u64)(offset)&0xfffULL) << 44) |                       \
	 (((__u64)(sfi) >> 3) & ((1ULL << 44) - 1)))
#define LOUPE_V8_TIER(p) (((__u64)(p) >> 56) & 3)
#define LOUPE_V8_OFFSET(p) (((__u64)(p) >> 44) & 0xfffULL)
#define LOUPE_V8_SFI(p) (((__u64)(p) & ((1ULL << 44) - 1)) << 3) /* untagged */

/* What the walk tells user space on first sight (loupe_runtime_seen_key.kind), read while
 * the process lives: a SharedFunctionInfo (ptr: its untagged address), or an optimized
 * Code object (ptr: its untagged address, token: its function's SharedFunctionInfo, which
 * code without deoptimization data does not name). */
#define LOUPE_V8_SEEN_SFI 1
#define LOUPE_V8_SEEN_CODE 2

/* One process's V8 (loupe_v8_procs, by tgid): where its builtins are and the layout the
 * step reads, all from the binary's v8dbg_* values. */
struct loupe_v8_proc {
	__u64 blob_low;	   /* the embedded builtins' code (interpreter entry, bytecode handlers) */
	__u64 blob_high;   /* 0 when the binary does not say: no frame reads as interpreted */
	__s16 fp_context;  /* off_fp_context: a Context, or a typed frame's marker */
	__s16 fp_function; /* off_fp_function: the JSFunction */
	__s16 fp_bytecode_offset; /* off_fp_bytecode_offset: interpreted frames' Smi, the lowest */
	__u16 off_map;		  /* HeapObject::map */
	__u16 off_instance_type;  /* Map::instance_type (16 bits) */
	__u16 off_shared;	  /* JSFunction::shared */
	__u16 type_jsfunction_first;
	__u16 type_jsfunction_last;
	__u16 bytecode_offset_bias; /* the Smi holds offset + this (BytecodeArray's header) */
	/* Optimized code (V8 11): JSFunction::code, 0 when this V8's layout is not known (its
	 * frames are then by function only); Code::instruction_start, then Code::flags and
	 * Code::instruction_size at these distances from it (within 24 bytes). */
	__u16 off_code;
	__u16 off_code_start;
	__u8 code_flags_at;
	__u8 code_size_at;
	__u8 code_kind_mask;	 /* the kind in the flags' low bits */
	__u8 code_kind_baseline; /* Sparkplug: by function only (its pc maps to bytecode) */
	__u16 pad[3];
};

#endif /* LOUPE_V8_H */
