/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * Types shared by memalloc.bpf.c and the user-space plugin: fixed-width fields only,
 * no pointers, so both compilers agree on the layout.
 */
#ifndef LOUPE_MEMALLOC_H
#define LOUPE_MEMALLOC_H

#ifndef __bpf__
#include <linux/types.h>
#endif

#include "loupe/ustack.h"

#define MA_STACK_DEPTH 127
/* Entries of the exponential-quantile table Poisson sampling draws from. */
#define MA_EXP_TABLE 1024

/* Where an allocation came from; part of the stack key so user and kernel sites of one
 * process never merge. */
enum ma_origin {
  MA_ORIGIN_USER = 0,    /* libc allocator, via uprobes */
  MA_ORIGIN_KMALLOC = 1, /* kmalloc / kmem_cache_alloc */
  MA_ORIGIN_PAGE = 2,    /* page allocator */
};

/* Allocator entry points; the index travels in the attach cookie. */
enum ma_func {
  MA_MALLOC = 0,
  MA_CALLOC = 1,
  MA_REALLOC = 2,
  MA_POSIX_MEMALIGN = 3,
  MA_ALIGNED_ALLOC = 4,
  MA_MEMALIGN = 5,
  MA_VALLOC = 6,
  MA_PVALLOC = 7,
  MA_NR_FUNCS = 8,
};

/* One allocation site: a process, its user stack and its kernel stack. */
struct ma_stack_key {
  __u32 tgid;
  __s32 user_stack_id;   /* < 0: no stack (the negative errno of bpf_get_stackid) */
  __s32 kernel_stack_id; /* < 0: none or failed */
  __u32 origin;          /* enum ma_origin */
};

/* Per-site totals of the sampled allocations (user space scales them). */
struct ma_stack_stats {
  __u64 allocs;
  __u64 bytes;
  __u64 frees; /* frees of allocations this site made while traced */
  __u64 freed_bytes;
};

/* A live allocation, for leak detection. */
struct ma_alloc_key {
  __u64 addr; /* user pointer, kernel pointer, or pfn for pages */
  __u32 tgid; /* 0 for kernel memory: kernel addresses are global */
  __u32 origin;
};

struct ma_alloc_info {
  __u64 size;
  __u64 ts_ns; /* bpf_ktime_get_ns() at allocation */
  struct ma_stack_key stack;
};

/* An allocator call in flight on one thread, from entry to return. */
struct ma_pending {
  __u64 size;
  __u64 arg_ptr; /* realloc: the old pointer; posix_memalign: the out-pointer */
  __u32 func;    /* enum ma_func */
  __u32 depth;   /* allocator calls nested on this thread (realloc -> malloc) */
  __u32 sampled;
  __u32 pad;
};

/* Global counters, one slot per CPU (summed in user space). */
struct ma_counters {
  __u64 calls[MA_NR_FUNCS]; /* entries seen per allocator function */
  __u64 frees;              /* free() calls with a non-NULL pointer */
  __u64 frees_untracked;    /* free() of memory not in the outstanding map */
  __u64 sampled_out;        /* allocations skipped by sampling */
  __u64 failed;             /* allocator returned NULL / an error */
  __u64 nested;             /* allocator calls made from inside another (not counted twice) */
  __u64 unmatched_returns;  /* returns without their entry */
  __u64 pending_full;       /* the in-flight map refused an insert */
  __u64 stats_full;         /* the per-site map refused a new site */
  __u64 outstanding_full;   /* the outstanding map refused an allocation (leak report short) */
  __u64 user_stack_failed;  /* bpf_get_stackid(user) failed, other than collisions */
  __u64 kernel_stack_failed;
  __u64 stack_collisions; /* -EEXIST: the stack map bucket held another stack */
  __u64 kernel_allocs;    /* kmem tracepoint allocations that passed the filters */
  __u64 kernel_frees;
  __u64 kernel_frees_untracked;
  __u64 realloc_frees;  /* old blocks released by a moving or shrinking-to-0 realloc */
  __u64 processes_full; /* the seen-process map refused a process: its mappings not read early */
};

/* unwind = "dwarf": a sampled user allocation carries a copy of its caller's stack to
 * user space, which unwinds it and keeps the site; the live allocation's ma_alloc_info
 * then names the allocation, not its site: stack.user_stack_id = its sequence number,
 * stack.kernel_stack_id = MA_DWARF_SEQ. Its free (or realloc) sends the sequence back. */
#define MA_DWARF_SEQ (-2)
/* One record type on the ring (the core checks one type per ring): a free is exactly a
 * ma_dwarf_free long, an allocation at least a ma_dwarf_alloc. */
#define MA_RECORD_DWARF 1
#define MA_RECORD_DWARF_VERSION 1

struct ma_dwarf_free {
  __u16 type;
  __u16 version;
  __u32 len;
  __u32 tgid;
  __u32 seq;
  __u64 size;
};

struct ma_dwarf_alloc {
  struct ma_dwarf_free h; /* tgid, seq, size */
  struct loupe_ustack us; /* us.stack_len bytes follow */
};

#endif /* LOUPE_MEMALLOC_H */
