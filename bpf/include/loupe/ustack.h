/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * A copied user stack, as BPF programs put it in ring records for user space to unwind
 * with the CFI of the process's files (loupe_host_services.unwind_user): the user
 * registers at the sample and a bounded slice of the stack from sp upwards. Shared by
 * ustack.bpf.h and user space (sdk/include/loupe/sdk/ustack.hpp); fixed-width fields only.
 */
#ifndef LOUPE_USTACK_H
#define LOUPE_USTACK_H

#ifndef __bpf__
#include <linux/types.h>
#endif

/* x86-64 DWARF registers 0-16: rax rdx rcx rbx rsi rdi rbp rsp r8-r15 rip. */
#define LOUPE_USTACK_NREGS 17
#define LOUPE_USTACK_REG_BP 6
#define LOUPE_USTACK_REG_SP 7
#define LOUPE_USTACK_REG_IP 16
/* Largest slice a program may copy (its stack_bytes knob), and the default. */
#define LOUPE_USTACK_MAX_BYTES 16384
#define LOUPE_USTACK_DEFAULT_BYTES 8192
/* The stack is copied a page at a time (a fault ends the copy at the last whole page);
 * a scratch buffer needs this much slack past LOUPE_USTACK_MAX_BYTES for the verifier. */
#define LOUPE_USTACK_CHUNK 4096

/* loupe_ustack.flags */
#define LOUPE_USTACK_F_TASK_REGS 1u   /* sampled in kernel mode: the task's saved user regs */
#define LOUPE_USTACK_F_COPY_FAILED 2u /* not one byte of the stack could be read */
#define LOUPE_USTACK_F_SHORT 4u	      /* a page faulted before the knob's size was copied */

struct loupe_ustack {
	__u64 regs[LOUPE_USTACK_NREGS]; /* DWARF numbering, see above */
	__u32 flags;
	__u32 stack_len; /* bytes that follow this struct, copied from regs[SP] upwards */
};

/* Per-CPU counters of the copies (ustack.bpf.h's loupe_ustack_stats, key 0), summed in
 * user space. */
struct loupe_ustack_counters {
	__u64 captured;	   /* samples with registers and at least some stack */
	__u64 no_regs;	   /* a kernel thread or a task whose user registers are unknown */
	__u64 copy_failed; /* registers but not one byte of stack (sp unmapped or not resident) */
	__u64 short_copy;  /* fewer bytes than the knob: a fault at the top of the stack (normal
			      for shallow stacks) or at a page not resident */
	__u64 bytes;	   /* stack bytes copied, for the average record size */
};

#endif /* LOUPE_USTACK_H */
