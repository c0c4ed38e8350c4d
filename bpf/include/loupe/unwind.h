/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * Native unwind tables for the in-kernel unwinder (unwind.bpf.h): rows built in user space
 * from a file's .eh_frame (unwind/file_rows.cpp), one x86-64 rule per pc
 * range, and the mappings of a process that say which rows cover which addresses. Shared
 * by BPF and user space; fixed-width fields only.
 *
 * A row holds from its pc to the next row's pc. Every rule leaves the return address at
 * CFA - 8 and the caller's rsp at the CFA (the x86-64 call convention); rows whose CFI says
 * otherwise are LOUPE_UNWIND_CFA_UNSUPPORTED and the walk stops there, counted.
 */
#ifndef LOUPE_UNWIND_H
#define LOUPE_UNWIND_H

#ifndef __bpf__
#include <linux/types.h>
#endif

/* A row's CFA rule (loupe_unwind_row_cfa) */
#define LOUPE_UNWIND_CFA_NONE 0 /* no FDE covers the pc (a gap): frame pointers instead */
#define LOUPE_UNWIND_CFA_RSP 1	/* CFA = rsp + cfa_off */
#define LOUPE_UNWIND_CFA_RBP 2	/* CFA = rbp + cfa_off */
/* A PLT stub's rule (the linker's CFA expression): CFA = rsp + 8, plus 8 more once the
 * stub has pushed its argument, i.e. when (rip & 15) >= cfa_off. */
#define LOUPE_UNWIND_CFA_PLT 3
#define LOUPE_UNWIND_CFA_END 4	       /* the return address is undefined: the outermost frame */
#define LOUPE_UNWIND_CFA_SIGNAL 5      /* a signal trampoline (sigreturn): not followed yet */
#define LOUPE_UNWIND_CFA_UNSUPPORTED 6 /* any other rule (a CFA expression, rsp saved...) */
/* CFA = rsp + cfa_off with the return address in rdi, not on the stack: glibc's vfork pops
 * it before the syscall so the child, which runs on the same stack, cannot clobber it. The
 * walk follows it at the leaf only, where the saved user registers hold rdi (a vfork parent
 * blocked off the CPU); higher up rdi is unknown and the walk stops (unsupported). */
#define LOUPE_UNWIND_CFA_RSP_RA_RDI 7

/* A row's rbp rule (loupe_unwind_row_rbp) */
#define LOUPE_UNWIND_RBP_SAME 0	     /* the caller's rbp is this frame's */
#define LOUPE_UNWIND_RBP_AT_CFA 1    /* saved at CFA + rbp_off */
#define LOUPE_UNWIND_RBP_UNDEFINED 2 /* clobbered: unknown in the caller */

/* One row, 8 bytes (ABI 1.11): an array map rounds its values up to 8 bytes, so the 12 of
 * loupe_unwind_row_v1 took 16, and a system-wide session's 2M rows locked 32 MiB where they
 * now lock 16. `rule` packs, from bit 0: the CFA rule (3 bits), the rbp rule (2), rbp_off / 8
 * (8, signed: rbp is saved at a multiple of 8 within 1 KiB of the CFA) and cfa_off (19,
 * signed: frames up to 256 KiB; libc's largest is 33 KiB). A rule that does not fit is
 * built as LOUPE_UNWIND_CFA_UNSUPPORTED: the walk stops there, counted. */
struct loupe_unwind_row {
	__u32 pc; /* link-time address (files are below 4 GiB) */
	__u32 rule;
};

#define LOUPE_UNWIND_CFA_OFF_MAX ((1 << 18) - 1)
#define LOUPE_UNWIND_CFA_OFF_MIN (-(1 << 18))
#define LOUPE_UNWIND_RBP_OFF_MAX (127 * 8)
#define LOUPE_UNWIND_RBP_OFF_MIN (-128 * 8)

static inline __u32 loupe_unwind_row_cfa(const struct loupe_unwind_row *r)
{
	return r->rule & 7;
}
static inline __u32 loupe_unwind_row_rbp(const struct loupe_unwind_row *r)
{
	return (r->rule >> 3) & 3;
}
static inline __s32 loupe_unwind_row_rbp_off(const struct loupe_unwind_row *r)
{
	return (__s32)(__s8)(__u8)(r->rule >> 5) * 8;
}
static inline __s32 loupe_unwind_row_cfa_off(const struct loupe_unwind_row *r)
{
	return (__s32)r->rule >> 13;
}
/* The rule word of a row; 0 (and *rule untouched) when an offset does not fit. */
static inline int loupe_unwind_rule(__u32 cfa, __u32 rbp, __s32 rbp_off, __s32 cfa_off, __u32 *rule)
{
	if (cfa_off < LOUPE_UNWIND_CFA_OFF_MIN || cfa_off > LOUPE_UNWIND_CFA_OFF_MAX ||
	    rbp_off < LOUPE_UNWIND_RBP_OFF_MIN || rbp_off > LOUPE_UNWIND_RBP_OFF_MAX ||
	    rbp_off % 8 != 0 || cfa > 7 || rbp > 3)
		return 0;
	*rule = cfa | (rbp << 3) | (((__u32)(rbp_off / 8) & 0xff) << 5) | ((__u32)cfa_off << 13);
	return 1;
}

/* The row of ABI 1.5-1.10, 12 bytes: what the host writes into the rows map of a plugin
 * built against those (its map's values are 12 bytes; it keeps its own copy). */
struct loupe_unwind_row_v1 {
	__u32 pc;
	__u8 cfa;
	__u8 rbp;
	__s16 rbp_off;
	__s32 cfa_off;
};

/* Executable mappings of one process with rows, sorted by start. */
#define LOUPE_UNWIND_MAX_MAPPINGS 64

/* A file's rows are followed in loupe_unwind_rows by its page index, so a lookup searches
 * the few rows of one page instead of all of the file's (python3.11 has 65k: 17 steps, each
 * a likely cache miss): for each LOUPE_UNWIND_PAGE_SIZE bytes of link-time addresses from
 * page_base, an entry whose `pc` field holds the row (relative to row_first) in force at
 * the page's start, 0 when none is; then one more, row_count - 1. The row in force at an
 * address of page k is between entries k and k + 1, both included. */
#define LOUPE_UNWIND_PAGE_SHIFT 8
#define LOUPE_UNWIND_PAGE_SIZE (1u << LOUPE_UNWIND_PAGE_SHIFT)

struct loupe_unwind_mapping {
	__u64 start; /* runtime [start, end) */
	__u64 end;
	__u64 bias;	  /* runtime - link-time address */
	__u32 row_first;  /* the file's rows in loupe_unwind_rows: [first, first + count) */
	__u32 row_count;  /* 0: a mapping without rows (JIT, vdso, no .eh_frame) */
	__u32 page_first; /* its page index in loupe_unwind_rows: page_count + 1 entries */
	__u32 page_count; /* 0: no index (every row is searched) */
	__u32 page_base;  /* link-time address of page 0: the first row's, rounded down */
	__u32 pad;
};

/* loupe_unwind_proc.flags: which runtimes' entries the process has, a bit per registered
 * runtime (LOUPE_RUNTIME_*, below), so the walk looks up only those it runs. */
#define LOUPE_UNWIND_PROC_RUNTIME(id) (1u << (id))
#define LOUPE_UNWIND_PROC_PYTHON 1  /* a CPython interpreter: loupe_python_procs has it */
#define LOUPE_UNWIND_PROC_HOTSPOT 2 /* a HotSpot JVM: loupe_hotspot_procs has it */
#define LOUPE_UNWIND_PROC_V8 4	    /* a V8 (Node.js): loupe_v8_procs has it */

struct loupe_unwind_proc {
	__u32 count;
	__u32 flags; /* LOUPE_UNWIND_PROC_* */
	struct loupe_unwind_mapping maps[LOUPE_UNWIND_MAX_MAPPINGS];
};

/* A file with rows, found from the VMA that holds a pc (bpf_find_vma) when the process has
 * no loupe_unwind_procs entry yet: a process's first milliseconds, and every process too
 * short-lived for user space to read its maps (a shell loop's commands), are unwound by
 * their files' rows as soon as some process mapped the same file. Keyed as the kernel
 * names the mapped file: its inode number and its superblock's dev_t (major << 20 | minor,
 * as /proc/PID/maps prints them). */
struct loupe_unwind_file_key {
	__u64 ino;
	__u32 dev;
	__u32 pad;
};

#define LOUPE_UNWIND_FILE_SEGMENTS 4

struct loupe_unwind_segment {
	__u64 offset; /* p_offset */
	__u64 vaddr;  /* p_vaddr */
	__u64 filesz; /* p_filesz */
};

/* The same fields as a loupe_unwind_mapping's, but the bias: a mapping of file offset
 * `pgoff` at `start` has bias start - (vaddr - (offset - pgoff)) for the executable
 * segment holding pgoff (loadable segments start inside their first page). */
struct loupe_unwind_file {
	__u32 row_first;
	__u32 row_count;
	__u32 page_first;
	__u32 page_count;
	__u32 page_base;
	__u32 n_segments;
	struct loupe_unwind_segment segments[LOUPE_UNWIND_FILE_SEGMENTS];
};

/* Frames per stack: the bound of the walk (a stack deeper is cut there, counted). The
 * same as a BPF stack map's 127 so a stack's value reads like one (zero-terminated). */
#define LOUPE_UNWIND_MAX_DEPTH 127

struct loupe_unwind_stack {
	__u64 addrs[LOUPE_UNWIND_MAX_DEPTH]; /* leaf first: the pc, then return addresses; 0 ends */
};

/* Per-CPU counters of the walks (unwind.bpf.h's loupe_unwind_stats, key 0). */
struct loupe_unwind_counters {
	__u64 walks;		  /* stacks walked */
	__u64 frames;		  /* addresses recorded */
	__u64 table_frames;	  /* frames unwound by a row */
	__u64 fp_frames;	  /* frames unwound by the frame pointer (no rows for the pc) */
	__u64 plt_frames;	  /* frames in a PLT stub */
	__u64 end_of_stack;	  /* walks that reached the outermost frame (CFA_END or ra 0) */
	__u64 depth_bound;	  /* walks cut at LOUPE_UNWIND_MAX_DEPTH */
	__u64 no_process;	  /* stacks with a frame no row covered (no tables for the process
				   * or the file yet, JIT code, the vdso): walked on by rbp there */
	__u64 unsupported;	  /* walks stopped at a row the unwinder does not follow */
	__u64 signal_frames;	  /* walks stopped at a signal trampoline */
	__u64 read_failed;	  /* a stack read faulted: the walk stops there */
	__u64 fp_stopped;	  /* frame-pointer fallback ended (rbp 0 or not a stack address) */
	__u64 bad_frame;	  /* a rule gave a CFA at or below sp (a wrong row or garbage) */
	__u64 ids_full;		  /* the stack store had no free slot near the hash: no stack id */
	__u64 no_regs;		  /* no user registers (kernel thread) */
	__u64 vma_frames;	  /* frames whose file was found from the VMA (no process entry) */
	__u64 python_frames;	  /* Python frames recorded */
	__u64 python_stacks;	  /* stacks with Python frames */
	__u64 python_no_thread;	  /* an evaluation loop without a thread state (unsupported key,
				   * unreadable TLS): its Python frames are missing */
	__u64 python_read_failed; /* a Python frame could not be read: the rest are missing */
	__u64 runtime_seen_lost;  /* a runtime object's first sighting (a code object, a
				   * Method*, an nmethod) not told to user space (the ring was
				   * full): its frames unnamed until told again */
	__u64 event_cut;	  /* stacks copied into an event cut at its frame array
				   * (loupe_unwind_user_copy): their root is missing */
	__u64 hotspot_frames;	  /* Java frames recorded (interpreted, compiled, stubs) */
	__u64 hotspot_stacks;	  /* stacks with Java frames */
	__u64 hotspot_lost;	  /* walks stopped at a CodeCache frame that could not be
				   * unwound (no blob for the pc, an unreadable frame) */
	__u64 v8_frames;	  /* JavaScript frames recorded (V8's, named by their function) */
	__u64 v8_stacks;	  /* stacks with JavaScript frames */
};

/*
 * Runtime frames: a frame of a language runtime's own (a Python function, a Java method)
 * recorded by the walk in one stack slot, so a stack stays an array of __u64 that the
 * symbolizer reads slot by slot. Bits 63:62 are 01, which no user address (below 2^47) or
 * kernel address (bits 63:47 set) has; bits 61:58 name the runtime (a registered value
 * below); bits 57:0 are the runtime's payload, which its user-space half decodes. A new
 * runtime takes the next value here and decodes its own payload: nothing else reads it.
 */
#define LOUPE_RUNTIME_TAG (1ULL << 62)
#define LOUPE_RUNTIME_PAYLOAD_BITS 58
#define LOUPE_RUNTIME_PAYLOAD_MASK ((1ULL << LOUPE_RUNTIME_PAYLOAD_BITS) - 1)
#define LOUPE_RUNTIME_FRAME(runtime, payload)                                                      \
	(LOUPE_RUNTIME_TAG | ((__u64)(runtime) << LOUPE_RUNTIME_PAYLOAD_BITS) |                    \
	 ((__u64)(payload)&LOUPE_RUNTIME_PAYLOAD_MASK))
#define LOUPE_RUNTIME_IS_FRAME(v) (((__u64)(v) >> 62) == 1)
#define LOUPE_RUNTIME_ID(v) (((__u64)(v) >> LOUPE_RUNTIME_PAYLOAD_BITS) & 0xf)
#define LOUPE_RUNTIME_PAYLOAD(v) ((__u64)(v)&LOUPE_RUNTIME_PAYLOAD_MASK)

/* The registered runtimes. Python is 0 so that its frames read as they did before the
 * registry (ABI 1.7-1.9 captures replay unchanged). */
#define LOUPE_RUNTIME_PYTHON 0
#define LOUPE_RUNTIME_HOTSPOT 1
#define LOUPE_RUNTIME_V8 2
#define LOUPE_RUNTIME_COUNT 16

/* What a walk saw for the first time and tells user space through the session's runtime
 * ring, so it is read while its process lives (a code object, a Method*, an nmethod): once
 * per key, again when another object takes the address (a different token). An LRU map of
 * these keys remembers what was told. Python's keys are {tgid, 0, 0, code, token}: the
 * bytes of loupe_python_code_key. */
struct loupe_runtime_seen_key {
	__u32 tgid;
	__u16 runtime; /* LOUPE_RUNTIME_* */
	__u16 kind;    /* the runtime's own (LOUPE_HOTSPOT_SEEN_*) */
	__u64 ptr;
	__u64 token;
};

/*
 * Python frames (unwind.bpf.h, for a process whose loupe_unwind_proc has
 * LOUPE_UNWIND_PROC_PYTHON): where the native walk meets the evaluation loop
 * (_PyEval_EvalFrameDefault), the Python frames that activation runs are recorded before its
 * native frame, innermost first, each in one stack slot: a runtime frame whose payload is
 * the code object's address and the instruction.
 */
#define LOUPE_PYTHON_TAG LOUPE_RUNTIME_TAG
#define LOUPE_PYTHON_CODE_BITS 44 /* code >> 3: objects are 8-aligned, below 2^47 */
/* Instructions past it are recorded as it: their line is the one of instruction 16383. */
#define LOUPE_PYTHON_INDEX_MAX 0x3fffULL
#define LOUPE_PYTHON_FRAME(code, index)                                                            \
	LOUPE_RUNTIME_FRAME(LOUPE_RUNTIME_PYTHON,                                                  \
			    ((__u64)(index) << LOUPE_PYTHON_CODE_BITS) |                           \
				(((__u64)(code) >> 3) & ((1ULL << LOUPE_PYTHON_CODE_BITS) - 1)))
#define LOUPE_PYTHON_IS_FRAME(v)                                                                   \
	(LOUPE_RUNTIME_IS_FRAME(v) && LOUPE_RUNTIME_ID(v) == LOUPE_RUNTIME_PYTHON)
#define LOUPE_PYTHON_CODE(v) (((__u64)(v) & ((1ULL << LOUPE_PYTHON_CODE_BITS) - 1)) << 3)
#define LOUPE_PYTHON_INDEX(v) (((__u64)(v) >> LOUPE_PYTHON_CODE_BITS) & LOUPE_PYTHON_INDEX_MAX)

/* loupe_python_proc.entry: how the frames of one evaluation-loop activation end. */
#define LOUPE_PYTHON_ENTRY_ONE 0  /* 3.10: one frame object per activation */
#define LOUPE_PYTHON_ENTRY_FLAG 1 /* 3.11: the activation's first frame has is_entry set */
#define LOUPE_PYTHON_ENTRY_SHIM 2 /* 3.12: a C-stack shim frame (owner 3) below its first */

/* Bytes of a frame read at once: every field the walk needs lies within them. */
#define LOUPE_PYTHON_FRAME_BYTES 104

/* One interpreter process, written by user space (core/src/session/python_frames.cpp):
 * runtime addresses and the layout of its CPython version. */
struct loupe_python_proc {
	__u64 tss_key_addr;  /* the pthread key (an int) under which threads keep their state */
	__u64 eval_start[2]; /* _PyEval_EvalFrameDefault and its .cold part, loaded, [start, end) */
	__u64 eval_end[2];
	__u32 tsd_offset;     /* glibc: a key's value at fsbase + tsd_offset + 16 * key */
	__u16 tstate_frame;   /* PyThreadState -> cframe (3.11, 3.12) or frame (3.10) */
	__u16 cframe_current; /* _PyCFrame -> current_frame; 0xffff: none (3.10) */
	__u16 frame_code;     /* frame -> code object (each < LOUPE_PYTHON_FRAME_BYTES) */
	__u16 frame_previous;
	__u16 frame_instr;   /* prev_instr (3.11+, a pointer) or f_lasti (3.10, an int index) */
	__u16 frame_entry;   /* is_entry (3.11) or owner (3.12) */
	__u16 code_adaptive; /* where the bytecode starts in a code object (3.11+) */
	__u8 entry_kind;     /* LOUPE_PYTHON_ENTRY_* */
	__u8 pad;
	/* What tells two code objects at one address apart (one freed, another allocated
	 * there): co_firstlineno, and the name object co_qualname (co_name in 3.10) points to,
	 * read at once from code + code_first (code_name - code_first < LOUPE_PYTHON_CODE_BYTES).
	 */
	__u16 code_first;
	__u16 code_name;
	__u32 pad2;
};

#define LOUPE_PYTHON_CODE_BYTES 80

#endif /* LOUPE_UNWIND_H */
