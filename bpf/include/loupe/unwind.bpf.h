/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * The native user-stack unwinder in the kernel: the current task's stack walked with
 * unwind rows built in user space from each file's .eh_frame (loupe/unwind.h), as the
 * OpenTelemetry profiler and Parca's agent do. Unlike the kernel's frame-pointer walk
 * (bpf_get_stackid(BPF_F_USER_STACK)), the leaf is unwound by its own rule, so a leaf
 * that builds no frame (libc's read, nanosleep) keeps its caller, and code built without
 * frame pointers unwinds to main. Where a pc has no rows (JIT code, the vdso, a file
 * without .eh_frame, a process whose tables are not loaded) that frame is unwound by its
 * frame pointer, as runtimes that keep one expect.
 *
 * Per frame: the mapping holding pc (binary search of the process's sorted mappings), its
 * row (binary search of the file's rows at pc - bias, pc - 1 for return addresses: a call
 * may be a function's last instruction), CFA from rsp or rbp, the return address at
 * CFA - 8 and the caller's rbp as the row says. The frames run in bpf_loop() (5.17+), so
 * the searches' bounded loops are verified once, not once per frame. Two things keep a
 * walk near the cost of the kernel's frame-pointer walk (offcpu's sched_switch program on
 * a Python ping-pong, 12.5 frames a stack: 5.65 -> 4.05 us a run, fp 3.83): a per-CPU
 * cache of the rows found before (by file and link-time pc), and the stack near sp copied
 * a page at a time instead of read 8 bytes a frame.
 *
 * Stacks are stored once each under a 32-bit id (loupe_unwind_stacks[id], leaf first,
 * zero-terminated: read like a BPF stack map's value); the id is the slot of the stack's
 * 64-bit hash, claimed with one BPF_NOEXIST insert (atomic across CPUs, no counter).
 *
 *   __s32 id = loupe_unwind_user_stack();   // -1: none (kernel thread, store full)
 *   long n = loupe_unwind_user_copy(e->user_stack, sizeof(e->user_stack));  // bytes, or < 0
 *
 * User space, before load: sizes loupe_unwind_rows (rows) and loupe_unwind_stacks /
 * loupe_unwind_slots (stacks) and sets loupe_unwind_max_stacks to the latter; after load:
 * fills the rows and one loupe_unwind_procs entry per process (tgid). Counters:
 * loupe_unwind_stats (per-CPU, key 0). The walk's state sits in a per-CPU scratch value:
 * callers must not nest on one CPU (sched_switch runs with interrupts off).
 */
#ifndef LOUPE_UNWIND_BPF_H
#define LOUPE_UNWIND_BPF_H

#include <bpf/bpf_core_read.h>
#include <bpf/bpf_helpers.h>

#include "loupe/hotspot.h"
#include "loupe/unwind.h"
#include "loupe/v8.h"

const volatile __u32 loupe_unwind_max_stacks = 16384;

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1 << 20); /* sized by user space */
	__type(key, __u32);
	__type(value, struct loupe_unwind_row);
} loupe_unwind_rows SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 4096);
	__uint(map_flags, BPF_F_NO_PREALLOC); /* written by user space only */
	__type(key, __u32);		      /* tgid */
	__type(value, struct loupe_unwind_proc);
} loupe_unwind_procs SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 4096);
	__uint(map_flags, BPF_F_NO_PREALLOC); /* written by user space only */
	__type(key, struct loupe_unwind_file_key);
	__type(value, struct loupe_unwind_file);
} loupe_unwind_files SEC(".maps");

/* Stack id -> its addresses; stack id -> the hash that owns it. */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 16384);
	__type(key, __u32);
	__type(value, struct loupe_unwind_stack);
} loupe_unwind_stacks SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 16384);
	__type(key, __u32);
	__type(value, __u64);
} loupe_unwind_slots SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct loupe_unwind_counters);
} loupe_unwind_stats SEC(".maps");

/* Rows found before, by file and link-time address: a walk meets the same call sites again
 * and again (a thread blocks at the same places), and rows are only ever appended, so an
 * entry never goes stale. Direct-mapped, per CPU: a miss costs one array read. */
#define LOUPE_UNWIND_ROW_CACHE 1024

struct loupe_unwind_cached_row {
	__u32 file; /* the file's row_first + 1; 0: empty */
	__u32 pc;   /* link-time, as searched (pc - 1 for a return address) */
	__u32 idx;  /* its row in loupe_unwind_rows */
	__u32 pad;
};

struct loupe_unwind_row_cache {
	struct loupe_unwind_cached_row e[LOUPE_UNWIND_ROW_CACHE];
};

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct loupe_unwind_row_cache);
} loupe_unwind_row_cache SEC(".maps");

/* Python frames (loupe/unwind.h): the interpreters, written by user space. */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 1024);
	__uint(map_flags, BPF_F_NO_PREALLOC); /* written by user space only */
	__type(key, __u32);		      /* tgid */
	__type(value, struct loupe_python_proc);
} loupe_python_procs SEC(".maps");

/* What the runtimes' frames referred to, seen for the first time (loupe/unwind.h): each
 * key is told once through the ring, so user space reads the object while its process
 * lives. LRU: a key evicted is told again, and user space finds it cached. */
struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, 16384);
	__type(key, struct loupe_runtime_seen_key);
	__type(value, __u8);
} loupe_runtime_seen SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_RINGBUF);
	__uint(max_entries, 256 * 1024);
} loupe_runtime_ring SEC(".maps");

/* HotSpot JVMs (loupe/hotspot.h), written by user space (runtimes/hotspot/). */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 256);
	__uint(map_flags, BPF_F_NO_PREALLOC); /* written by user space only */
	__type(key, __u32);		      /* tgid */
	__type(value, struct loupe_hotspot_proc);
} loupe_hotspot_procs SEC(".maps");

/* V8s (Node.js; loupe/v8.h), written by user space (runtimes/v8/). */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 256);
	__uint(map_flags, BPF_F_NO_PREALLOC); /* written by user space only */
	__type(key, __u32);		      /* tgid */
	__type(value, struct loupe_v8_proc);
} loupe_v8_procs SEC(".maps");

#define LOUPE_UNWIND_WINDOWS 2
#define LOUPE_UNWIND_PAGE 4096

struct loupe_unwind_state {
	__u64 pc;
	__u64 sp;
	__u64 bp;
	__u64 hash;
	__u64 leaf_di; /* the leaf's rdi (LOUPE_UNWIND_CFA_RSP_RA_RDI) */
	__u32 tgid;
	__u32 depth;
	__u32 done;	 /* the walk ended on its own (not at the depth bound) */
	__u32 fp_walked; /* a frame had no row: this stack was walked (partly) by rbp */
	/* Tallied here and added to loupe_unwind_stats once a walk, not looked up per frame. */
	__u32 stop; /* why the walk ended: LOUPE_UNWIND_STOP_* */
	__u32 table_frames;
	__u32 fp_frames;
	__u32 plt_frames;
	__u32 vma_frames;
	/* The process has no loupe_unwind_procs entry: each mapping is found from its VMA. */
	__u32 no_proc;
	/* Python: the process runs an interpreter (py, copied at the walk's start); the
	 * thread's frames were looked up; the activation at pc has had its frames. */
	__u32 py_on;
	__u32 py_init;
	__u32 py_done_pc;
	__u32 py_frames;
	__u32 py_stop;	/* 1: no thread state, 2: a frame unreadable */
	__u32 rt_lost;	/* runtime objects whose sighting the ring had no room for */
	__u32 nat;	/* native frames recorded: the first is the leaf, unwound by its own pc */
	__u64 py_frame; /* the next Python frame to record; 0: none left */
	struct loupe_python_proc py;
	struct loupe_runtime_seen_key seen_key;
	__u8 py_buf[LOUPE_PYTHON_FRAME_BYTES];
	__u8 py_code[LOUPE_PYTHON_CODE_BYTES];
	struct loupe_unwind_file_key file_key;
	/* HotSpot: the JVM's entry (hs, copied at the walk's start when hs_on), the leaf's r13
	 * (the interpreter's bytecode pointer), a CodeBlob's header and an interpreter frame's
	 * slots read at once, and the walk's tallies. */
	__u32 hs_on;
	__u32 hs_frames;
	__u32 hs_lost; /* frames in the CodeCache that could not be unwound: the walk ended */
	__u32 hs_pad;
	__u64 leaf_r13;
	struct loupe_hotspot_proc hs;
	__u8 hs_buf[LOUPE_HOTSPOT_BLOB_BYTES];
	/* V8: the process's entry (copied at the walk's start when v8_on), the JavaScript
	 * frames recorded, and the hash before the last frame's pc was mixed in (a frame the
	 * V8 step names replaces its pc). */
	__u32 v8_on;
	__u32 v8_frames;
	__u64 hash_before;
	struct loupe_v8_proc v8;
	__u8 v8_slots[48]; /* a frame's slots below its fp, read at once */
	__u64 v8_word[2];  /* an object's fields, read here rather than on the BPF stack */
	/* A saved rbp and the return address above it, read at once: here, not on the BPF
	 * stack, whose 512 bytes the walk's calls share (6.1 counted 544 with it there). */
	__u64 pair[2];
	/* The mapping of the last frame, copied: callers mostly sit in the same file as
	 * their callee, and are then found without the process lookup and its search. */
	struct loupe_unwind_mapping last_map;
	struct loupe_unwind_stack stack;
	/* The stack near sp, copied in pages: the rest of sp's page at the walk's start, the
	 * page above on the first read there. One copy of a page costs less than the dozen
	 * 8-byte reads (a fault-guarded user access each) the frames in it would make. */
	__u64 win_base[LOUPE_UNWIND_WINDOWS]; /* user address of win[k][0]; 0: not read */
	__u32 win_len[LOUPE_UNWIND_WINDOWS];  /* bytes copied; 0: not read or unreadable */
	__u8 win[LOUPE_UNWIND_WINDOWS][LOUPE_UNWIND_PAGE];
};

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct loupe_unwind_state);
} loupe_unwind_scratch SEC(".maps");

enum {
	LOUPE_UNWIND_STOP_NONE,
	LOUPE_UNWIND_STOP_END,
	LOUPE_UNWIND_STOP_FP,
	LOUPE_UNWIND_STOP_UNSUPPORTED,
	LOUPE_UNWIND_STOP_SIGNAL,
	LOUPE_UNWIND_STOP_BAD_FRAME,
	LOUPE_UNWIND_STOP_READ_FAILED,
	LOUPE_UNWIND_STOP_HOTSPOT, /* a CodeCache frame that could not be unwound */
};

/* Probes this many slots past the hash's own before giving up (the store is full). */
#define LOUPE_UNWIND_PROBES 8
/* Binary-search steps: 2^7 > LOUPE_UNWIND_MAX_MAPPINGS, 2^22 rows per file (python3 has
 * 65k, libc 28k). */
#define LOUPE_UNWIND_MAP_STEPS 7
#define LOUPE_UNWIND_ROW_STEPS 22

static __always_inline struct loupe_unwind_counters *loupe_unwind_counters(void)
{
	__u32 zero = 0;

	return bpf_map_lookup_elem(&loupe_unwind_stats, &zero);
}

/* One step of the binary search for the first mapping whose start is above pc, in
 * bpf_loop(): indexing the mappings by a searched index made the verifier track every
 * step's bounds apart (126k instructions processed for 7 steps unrolled, on 6.18). */
struct loupe_unwind_map_search {
	const struct loupe_unwind_proc *proc;
	__u64 pc;
	__u32 lo;
	__u32 hi;
};

static long loupe_unwind_map_step(__u32 i, void *arg)
{
	struct loupe_unwind_map_search *s = arg;
	__u32 mid;

	if (s->lo >= s->hi)
		return 1;
	mid = (s->lo + s->hi) / 2;
	if (s->proc->maps[mid & (LOUPE_UNWIND_MAX_MAPPINGS - 1)].start <= s->pc)
		s->lo = mid + 1;
	else
		s->hi = mid;
	return 0;
}

/* The mapping of `proc` holding pc, or NULL. */
static __always_inline const struct loupe_unwind_mapping *
loupe_unwind_find_mapping(const struct loupe_unwind_proc *proc, __u64 pc)
{
	struct loupe_unwind_map_search s = {.proc = proc, .pc = pc, .lo = 0, .hi = proc->count};
	const struct loupe_unwind_mapping *m;

	if (s.hi > LOUPE_UNWIND_MAX_MAPPINGS)
		s.hi = LOUPE_UNWIND_MAX_MAPPINGS;
	bpf_loop(LOUPE_UNWIND_MAP_STEPS, loupe_unwind_map_step, &s, 0);
	if (s.lo == 0)
		return NULL;
	m = &proc->maps[(s.lo - 1) & (LOUPE_UNWIND_MAX_MAPPINGS - 1)];
	return pc < m->end ? m : NULL;
}

/* One step of the binary search for the last row at or below pc, in bpf_loop(): the
 * verifier checks its body once; unrolled, each of its 22 steps multiplied the states. */
struct loupe_unwind_search {
	__u64 pc;
	__u32 lo;
	__u32 hi;
};

static long loupe_unwind_search_step(__u32 i, void *arg)
{
	struct loupe_unwind_search *s = arg;
	struct loupe_unwind_row *r;
	__u32 mid;

	if (s->lo >= s->hi)
		return 1;
	mid = s->lo + (s->hi - s->lo) / 2;
	r = bpf_map_lookup_elem(&loupe_unwind_rows, &mid);
	if (!r) {
		s->lo = s->hi = 0;
		return 1;
	}
	if (r->pc <= s->pc)
		s->lo = mid + 1;
	else
		s->hi = mid;
	return 0;
}

/* bpf_find_vma's callback: the mapping holding the pc, as a loupe_unwind_mapping in the
 * walk's scratch (last_map), when its file has rows. */
static long loupe_unwind_vma_mapping(struct task_struct *task, struct vm_area_struct *vma,
				     void *arg)
{
	const struct loupe_unwind_file *f;
	struct loupe_unwind_state *st;
	const struct loupe_unwind_segment *seg;
	struct file *file = vma->vm_file;
	struct inode *inode;
	__u64 pgoff, page_off;
	__u32 zero = 0;

	/* The key sits in the scratch: this callback is the deepest call of the walk, and 6.1
	 * bounds the stack of the whole chain at 512 bytes. */
	st = bpf_map_lookup_elem(&loupe_unwind_scratch, &zero);
	if (!file || !st)
		return 0;
	inode = BPF_CORE_READ(file, f_inode);
	if (!inode)
		return 0;
	st->file_key.ino = BPF_CORE_READ(inode, i_ino);
	st->file_key.dev = BPF_CORE_READ(inode, i_sb, s_dev);
	st->file_key.pad = 0;
	f = bpf_map_lookup_elem(&loupe_unwind_files, &st->file_key);
	if (!f)
		return 0;
	pgoff = vma->vm_pgoff << 12;
	for (int i = 0; i < LOUPE_UNWIND_FILE_SEGMENTS; i++) {
		if (i >= f->n_segments)
			break;
		seg = &f->segments[i];
		page_off = seg->offset & ~0xfffULL;
		if (pgoff < page_off || pgoff >= seg->offset + seg->filesz)
			continue;
		st->last_map.start = vma->vm_start;
		st->last_map.end = vma->vm_end;
		st->last_map.bias = vma->vm_start - (seg->vaddr - (seg->offset - pgoff));
		st->last_map.row_first = f->row_first;
		st->last_map.row_count = f->row_count;
		st->last_map.page_first = f->page_first;
		st->last_map.page_count = f->page_count;
		st->last_map.page_base = f->page_base;
		st->vma_frames++;
		return 0;
	}
	return 0;
}

/* Row idx is the one in force at link-time pc in m's file: the last at or below it. Checked
 * on every cache hit, so an entry half written by a walk that interrupted another on this
 * CPU (a uprobe program preempted on a fully preemptible kernel) can never give a wrong
 * row: at worst a miss. */
static __always_inline bool loupe_unwind_row_holds(const struct loupe_unwind_mapping *m, __u32 idx,
						   __u64 pc)
{
	struct loupe_unwind_row *r, *next;
	__u32 key = idx + 1;

	if (idx < m->row_first || idx >= m->row_first + m->row_count)
		return false;
	r = bpf_map_lookup_elem(&loupe_unwind_rows, &idx);
	if (!r || r->pc > pc)
		return false;
	if (key == m->row_first + m->row_count)
		return true;
	next = bpf_map_lookup_elem(&loupe_unwind_rows, &key);
	return next && next->pc > pc;
}

/* The index in loupe_unwind_rows of the row in force at runtime address `pc` of process
 * `tgid` (`ret`: pc is a return address, so the call's row is looked up), or -1 when the
 * process, the mapping or the row is missing. A global function: the verifier checks the
 * two binary searches once, with unknown arguments, instead of in every state the walk's
 * callback is entered with (975k instructions processed on 6.18 when inlined). */
__attribute__((noinline)) int loupe_unwind_row_index(__u32 tgid, __u64 pc, __u32 ret)
{
	const struct loupe_unwind_mapping *m = NULL;
	const struct loupe_unwind_proc *proc;
	struct loupe_unwind_search search;
	struct loupe_unwind_state *st;
	struct loupe_unwind_row *first, *last;
	struct loupe_unwind_row_cache *cache;
	struct loupe_unwind_cached_row *hit = NULL;
	__u32 zero = 0, lo, page, key, slot;

	st = bpf_map_lookup_elem(&loupe_unwind_scratch, &zero);
	if (st && pc >= st->last_map.start && pc < st->last_map.end) {
		m = &st->last_map;
	} else {
		proc = bpf_map_lookup_elem(&loupe_unwind_procs, &tgid);
		if (!proc)
			return -1;
		m = loupe_unwind_find_mapping(proc, pc);
		if (!m)
			return -1;
		if (st) {
			__builtin_memcpy(&st->last_map, m, sizeof(*m));
			m = &st->last_map;
		}
	}
	if (m->row_count == 0)
		return -1;
	pc = pc - m->bias - (ret ? 1 : 0);
	if (pc > 0xffffffffULL)
		return -1;
	cache = bpf_map_lookup_elem(&loupe_unwind_row_cache, &zero);
	if (cache) {
		slot = (__u32)((pc ^ ((__u64)m->row_first << 7)) * 0x9e3779b1u) >> (32 - 10) &
		       (LOUPE_UNWIND_ROW_CACHE - 1);
		hit = &cache->e[slot];
		if (hit->file == m->row_first + 1 && hit->pc == (__u32)pc &&
		    loupe_unwind_row_holds(m, hit->idx, pc))
			return (int)hit->idx;
	}
	search.lo = m->row_first;
	search.hi = m->row_first + m->row_count;
	search.pc = pc;
	/* Only the rows of pc's page, between the page index's entry and the next. */
	if (m->page_count) {
		if (pc < m->page_base)
			return -1;
		page = (pc - m->page_base) >> LOUPE_UNWIND_PAGE_SHIFT;
		if (page > m->page_count)
			page = m->page_count;
		key = m->page_first + page;
		first = bpf_map_lookup_elem(&loupe_unwind_rows, &key);
		key++;
		last = page < m->page_count ? bpf_map_lookup_elem(&loupe_unwind_rows, &key) : NULL;
		if (first && first->pc < m->row_count)
			search.lo = m->row_first + first->pc;
		if (last && last->pc < m->row_count)
			search.hi = m->row_first + last->pc + 1;
	}
	bpf_loop(LOUPE_UNWIND_ROW_STEPS, loupe_unwind_search_step, &search, 0);
	lo = search.lo;
	/* No row at or below pc: before the file's first (page 0 starts at or below it). */
	if (lo == 0 || lo == m->row_first)
		return -1;
	if (hit) {
		hit->file = m->row_first + 1;
		hit->pc = (__u32)pc;
		hit->idx = lo - 1;
	}
	return (int)(lo - 1);
}

/* 8 bytes of the stack at addr: from the copied pages when they hold them, else read. */
static __always_inline bool loupe_unwind_read(struct loupe_unwind_state *st, __u64 *dst, __u64 addr)
{
	__u64 off;

	/* The page above sp's, copied whole on the first read that needs it. */
	if (st->win_base[1] == 0 && st->win_base[0] && addr >= st->win_base[0] + st->win_len[0] &&
	    addr < st->win_base[0] + st->win_len[0] + LOUPE_UNWIND_PAGE) {
		st->win_base[1] = st->win_base[0] + st->win_len[0];
		st->win_len[1] =
		    bpf_probe_read_user(st->win[1], LOUPE_UNWIND_PAGE, (void *)st->win_base[1]) == 0
			? LOUPE_UNWIND_PAGE
			: 0;
	}
	off = addr - st->win_base[0];
	if (addr >= st->win_base[0] && off + sizeof(*dst) <= st->win_len[0] &&
	    off <= LOUPE_UNWIND_PAGE - sizeof(*dst)) {
		*dst = *(__u64 *)&st->win[0][off];
		return true;
	}
	off = addr - st->win_base[1];
	if (addr >= st->win_base[1] && off + sizeof(*dst) <= st->win_len[1] &&
	    off <= LOUPE_UNWIND_PAGE - sizeof(*dst)) {
		*dst = *(__u64 *)&st->win[1][off];
		return true;
	}
	return bpf_probe_read_user(dst, sizeof(*dst), (void *)addr) == 0;
}

/* Whether pc lies in the interpreter's evaluation loop (either of its parts). */
static __always_inline bool loupe_python_in_eval(const struct loupe_unwind_state *st, __u64 pc)
{
	return (pc >= st->py.eval_start[0] && pc < st->py.eval_end[0]) ||
	       (pc >= st->py.eval_start[1] && pc < st->py.eval_end[1]);
}

/* The current thread's innermost Python frame, or 0: its PyThreadState is the value of the
 * interpreter's pthread key in the thread's own TLS (glibc keeps the first 32 keys' values
 * in the thread descriptor at fsbase), so a thread that released the GIL (blocked in I/O,
 * off the CPU) is found too, not only the GIL's holder. */
static __always_inline __u64 loupe_python_first_frame(struct loupe_unwind_state *st)
{
	struct task_struct *task = bpf_get_current_task_btf();
	__u64 addr;

	/* Py_tss_t: {int _is_initialized; pthread_key_t _key}, read whole: before the
	 * interpreter made its key, key 0 is some other library's. */
	if (bpf_probe_read_user(&st->pair[0], sizeof(__u64), (void *)(st->py.tss_key_addr - 4)) ||
	    (__u32)st->pair[0] == 0 || (st->pair[0] >> 32) >= 32)
		return 0;
	addr = task->thread.fsbase + st->py.tsd_offset + 16 * (st->pair[0] >> 32);
	if (bpf_probe_read_user(&st->pair[0], sizeof(__u64), (void *)addr) || !st->pair[0])
		return 0;
	addr = st->pair[0] + st->py.tstate_frame;
	if (bpf_probe_read_user(&st->pair[0], sizeof(__u64), (void *)addr) || !st->pair[0])
		return 0;
	if (st->py.cframe_current != 0xffff) {
		addr = st->pair[0] + st->py.cframe_current;
		if (bpf_probe_read_user(&st->pair[0], sizeof(__u64), (void *)addr))
			return 0;
	}
	return st->pair[0];
}

/* 8 bytes of the frame read into py_buf, at a layout offset. */
static __always_inline __u64 loupe_python_field(const struct loupe_unwind_state *st, __u32 off)
{
	if (off > LOUPE_PYTHON_FRAME_BYTES - sizeof(__u64))
		return 0;
	return *(const __u64 *)&st->py_buf[off];
}

/* Tells user space of a runtime's object the first time a walk meets it (its LRU entry), so
 * it is read while its process lives. A record the ring has no room for is counted and its
 * entry dropped, so the next sighting tries again. The key is built in the scratch. */
static __always_inline void loupe_runtime_tell(struct loupe_unwind_state *st)
{
	if (bpf_map_lookup_elem(&loupe_runtime_seen, &st->seen_key))
		return;
	/* The value is a byte nobody reads: the key's own first one. */
	if (bpf_map_update_elem(&loupe_runtime_seen, &st->seen_key, &st->seen_key, BPF_NOEXIST))
		return; /* another CPU's sighting won, or the LRU had no free node: seen again */
	/* Woken (adaptively: only when the reader is waiting): its reader reads the object
	 * within microseconds, before a process that exits right after can take it along.
	 * Sightings are rare (once per object, LRU-deduplicated), so are the wake-ups. */
	if (bpf_ringbuf_output(&loupe_runtime_ring, &st->seen_key, sizeof(st->seen_key), 0)) {
		bpf_map_delete_elem(&loupe_runtime_seen, &st->seen_key);
		st->rt_lost++;
	}
}

static __always_inline void loupe_python_seen(struct loupe_unwind_state *st, __u64 code)
{
	__u32 off = st->py.code_name - st->py.code_first;

	st->seen_key.tgid = st->tgid;
	st->seen_key.runtime = LOUPE_RUNTIME_PYTHON;
	st->seen_key.kind = 0;
	st->seen_key.ptr = code;
	st->seen_key.token = 0;
	/* The token: a code object freed and another allocated at its address must be told
	 * again, or the first one's name would stay on the second's frames. */
	if (off <= LOUPE_PYTHON_CODE_BYTES - sizeof(__u64) &&
	    bpf_probe_read_user(st->py_code, sizeof(st->py_code),
				(void *)(code + st->py.code_first)) == 0)
		st->seen_key.token =
		    *(const __u64 *)&st->py_code[off] ^ *(const __u32 *)&st->py_code[0];
	loupe_runtime_tell(st);
}

/* One Python frame of the evaluation-loop activation at the walk's pc, at depth d: recorded
 * (0), and the cursor moved to the frame that called it. 1 when the activation has no more:
 * its native frame comes next, and the cursor stays at the next activation's first frame. */
static __always_inline int loupe_python_step(struct loupe_unwind_state *st, __u32 d)
{
	__u64 frame, code, prev;
	__s64 index;
	__u32 off;
	__u8 entry;

	if (!st->py_init) {
		st->py_init = 1;
		st->py_frame = loupe_python_first_frame(st);
		if (!st->py_frame)
			st->py_stop = 1;
	}
	frame = st->py_frame;
	if (!frame)
		goto done;
	if (bpf_probe_read_user(st->py_buf, sizeof(st->py_buf), (void *)frame)) {
		st->py_stop = 2;
		st->py_frame = 0;
		goto done;
	}
	code = loupe_python_field(st, st->py.frame_code);
	prev = loupe_python_field(st, st->py.frame_previous);
	off = st->py.frame_entry;
	if (off >= LOUPE_PYTHON_FRAME_BYTES)
		off = 0;
	entry = st->py_buf[off];
	/* 3.12: the shim an activation pushes below its first frame is not Python code. */
	if (st->py.entry_kind == LOUPE_PYTHON_ENTRY_SHIM && entry == 3) {
		st->py_frame = prev;
		goto done;
	}
	if (st->py.entry_kind == LOUPE_PYTHON_ENTRY_ONE) {
		off = st->py.frame_instr;
		if (off > LOUPE_PYTHON_FRAME_BYTES - sizeof(__s32))
			off = 0;
		index = *(const __s32 *)&st->py_buf[off];
	} else {
		/* The last instruction begun, in 2-byte code units from the bytecode's start;
		 * one before it (-1) at a frame's entry. */
		index = ((__s64)loupe_python_field(st, st->py.frame_instr) - (__s64)code -
			 (__s64)st->py.code_adaptive) >>
			1;
	}
	if (index < 0)
		index = 0;
	if (index > (__s64)LOUPE_PYTHON_INDEX_MAX)
		index = LOUPE_PYTHON_INDEX_MAX;
	if (d >= LOUPE_UNWIND_MAX_DEPTH)
		return 1;
	st->stack.addrs[d] = LOUPE_PYTHON_FRAME(code, index);
	st->depth = d + 1;
	st->hash = (st->hash ^ st->stack.addrs[d]) * 0x100000001b3ULL;
	st->py_frames++;
	loupe_python_seen(st, code);
	st->py_frame = prev;
	if (st->py.entry_kind == LOUPE_PYTHON_ENTRY_ONE ||
	    (st->py.entry_kind == LOUPE_PYTHON_ENTRY_FLAG && entry))
		st->py_done_pc = 1;
	return 0;
done:
	st->py_done_pc = 1;
	return 1;
}

/* The walk moves to the caller: its pc, sp and rbp. 1 when that ends the walk (a return
 * address of 0: the outermost frame). */
static __always_inline long loupe_unwind_to_caller(struct loupe_unwind_state *st, __u64 ra,
						   __u64 sp, __u64 bp)
{
	st->pc = ra;
	st->sp = sp;
	st->bp = bp;
	st->py_done_pc = 0;
	if (ra == 0) {
		st->stop = LOUPE_UNWIND_STOP_END;
		st->done = 1;
		return 1;
	}
	return 0;
}

#include "loupe/unwind_hotspot.bpf.h"
#include "loupe/unwind_v8.bpf.h"

/* One frame: records pc, then moves the state to the caller. 1 ends the walk. The state is
 * looked up again here: bpf_loop() passes only a pointer to the caller's stack. */
static long loupe_unwind_step(__u32 i, void *arg)
{
	__u32 zero = 0;
	struct loupe_unwind_state *st = bpf_map_lookup_elem(&loupe_unwind_scratch, &zero);
	struct loupe_unwind_row *row = NULL;
	__u64 pc, cfa, ra = 0, bp;
	bool ok;
	/* The row's rule, unpacked (loupe_unwind_row): CFA rule and offset, rbp rule and offset. */
	__u32 d, key, ret, kind = LOUPE_UNWIND_CFA_NONE, rbp_rule = 0;
	__s32 off = 0, rbp_off = 0;
	int idx;

	if (!st)
		return 1;
	pc = st->pc;
	bp = st->bp;
	d = st->depth;
	if (d >= LOUPE_UNWIND_MAX_DEPTH)
		return 1;
	/* An activation of the evaluation loop: its Python frames first, one an iteration,
	 * then its native frame (so C code it called sits below the Python that called it). */
	if (st->py_on && !st->py_done_pc && loupe_python_in_eval(st, st->nat ? pc - 1 : pc) &&
	    loupe_python_step(st, d) == 0)
		return 0;
	/* A JVM's CodeCache: the interpreter, compiled methods and stubs, by HotSpot's rules. */
	if (st->hs_on && pc >= st->hs.code_low && pc < st->hs.code_high)
		return loupe_hotspot_step(d) ? 1 : 0;
	st->stack.addrs[d] = pc;
	st->depth = d + 1;
	st->hash_before = st->hash;
	st->hash = (st->hash ^ pc) * 0x100000001b3ULL;
	ret = st->nat > 0;
	st->nat++;

	/* No entry for the process yet: the mapping holding pc from its VMA, when its file has
	 * rows (into last_map, which the row lookup tries first). Called here, not in the row
	 * lookup: one call deeper would pass 6.1's 512-byte bound on the chain's stack. The
	 * lookup fails (-EBUSY) while another thread holds the process's mmap lock. */
	if (st->no_proc && (pc < st->last_map.start || pc >= st->last_map.end)) {
		st->last_map.start = st->last_map.end = 0;
		bpf_find_vma(bpf_get_current_task_btf(), pc, loupe_unwind_vma_mapping, &zero, 0);
	}
	/* A return address is the instruction after the call: look up the call's row. */
	idx = loupe_unwind_row_index(st->tgid, pc, ret);
	if (idx >= 0) {
		key = (__u32)idx;
		row = bpf_map_lookup_elem(&loupe_unwind_rows, &key);
	}
	if (row) {
		kind = loupe_unwind_row_cfa(row);
		off = loupe_unwind_row_cfa_off(row);
		rbp_rule = loupe_unwind_row_rbp(row);
		rbp_off = loupe_unwind_row_rbp_off(row);
	}

	if (kind == LOUPE_UNWIND_CFA_NONE) {
		/* No rows: the frame pointer's chain, as runtimes that JIT keep it. Counted
		 * once a stack: code without frame pointers is cut here (a process or a library
		 * whose tables are not written yet). */
		st->fp_walked = 1;
		/* A V8 frame (JIT code, builtins): named by its JavaScript function. */
		if (st->v8_on) {
			/* No argument, and what it changed read back: values kept across
			 * the call would cost the walk's callback stack, which 6.1 sums. */
			loupe_v8_frame();
			bp = st->bp;
		}
		/* The saved rbp and the return address above it, in one read. */
		if (bp <= st->sp || !loupe_unwind_read(st, &st->pair[0], bp) ||
		    !loupe_unwind_read(st, &st->pair[1], bp + 8)) {
			st->stop = LOUPE_UNWIND_STOP_FP;
			st->done = 1;
			return 1;
		}
		bp = st->pair[0];
		ra = st->pair[1];
		st->fp_frames++;
		cfa = st->bp + 16;
	} else {
		switch (kind) {
		case LOUPE_UNWIND_CFA_RSP:
			cfa = st->sp + off;
			break;
		case LOUPE_UNWIND_CFA_RBP:
			cfa = st->bp + off;
			break;
		case LOUPE_UNWIND_CFA_RSP_RA_RDI:
			if (ret) {
				st->stop = LOUPE_UNWIND_STOP_UNSUPPORTED;
				st->done = 1;
				return 1;
			}
			cfa = st->sp + off;
			break;
		case LOUPE_UNWIND_CFA_PLT:
			cfa = st->sp + 8 + ((pc & 15) >= (__u64)off ? 8 : 0);
			st->plt_frames++;
			break;
		case LOUPE_UNWIND_CFA_END:
			st->stop = LOUPE_UNWIND_STOP_END;
			st->done = 1;
			return 1;
		case LOUPE_UNWIND_CFA_SIGNAL:
			st->stop = LOUPE_UNWIND_STOP_SIGNAL;
			st->done = 1;
			return 1;
		default:
			st->stop = LOUPE_UNWIND_STOP_UNSUPPORTED;
			st->done = 1;
			return 1;
		}
		/* The caller's sp is above this frame's, but for a return address kept in a
		 * register, where nothing of this frame is left on the stack. */
		if (cfa < st->sp || (cfa == st->sp && kind != LOUPE_UNWIND_CFA_RSP_RA_RDI)) {
			st->stop = LOUPE_UNWIND_STOP_BAD_FRAME;
			st->done = 1;
			return 1;
		}
		/* The return address at CFA - 8 (in rdi at a vfork leaf) and the caller's rbp
		 * where the row saved it, read into the scratch: a local whose address is taken
		 * lives on the BPF stack, and 6.1 bounds the whole call chain's at 512 bytes. */
		st->pair[0] = bp;
		ok = (kind == LOUPE_UNWIND_CFA_RSP_RA_RDI ||
		      loupe_unwind_read(st, &st->pair[1], cfa - 8)) &&
		     (rbp_rule != LOUPE_UNWIND_RBP_AT_CFA ||
		      loupe_unwind_read(st, &st->pair[0], cfa + rbp_off));
		ra = kind == LOUPE_UNWIND_CFA_RSP_RA_RDI ? st->leaf_di : st->pair[1];
		bp = st->pair[0];
		if (!ok) {
			st->stop = LOUPE_UNWIND_STOP_READ_FAILED;
			st->done = 1;
			return 1;
		}
		st->table_frames++;
	}
	return loupe_unwind_to_caller(st, ra, cfa, bp);
}

/* The stack's id in loupe_unwind_stacks, storing it if new; -1 when the store is full. */
static __always_inline __s32 loupe_unwind_store(struct loupe_unwind_state *st,
						struct loupe_unwind_counters *c)
{
	__u32 max = loupe_unwind_max_stacks ? loupe_unwind_max_stacks : 1;
	__u32 slot = (__u32)(st->hash % max);
	__u64 *owner;

	for (int i = 0; i < LOUPE_UNWIND_PROBES; i++) {
		owner = bpf_map_lookup_elem(&loupe_unwind_slots, &slot);
		if (owner && *owner == st->hash)
			return (__s32)slot;
		if (!owner) {
			/* Only one CPU's insert of a slot succeeds: it writes the stack. */
			if (bpf_map_update_elem(&loupe_unwind_slots, &slot, &st->hash,
						BPF_NOEXIST) == 0) {
				/* An array slot below max_entries: refused only if the
				 * sizes disagree, and then counted, never a stale stack. */
				if (bpf_map_update_elem(&loupe_unwind_stacks, &slot, &st->stack,
							BPF_ANY))
					break;
				return (__s32)slot;
			}
			owner = bpf_map_lookup_elem(&loupe_unwind_slots, &slot);
			if (owner && *owner == st->hash)
				return (__s32)slot;
		}
		slot = slot + 1 < max ? slot + 1 : 0;
	}
	c->ids_full++;
	return -1;
}

/* Walks the current task's user stack, from the user registers saved at its entry to the
 * kernel, into the per-CPU scratch (loupe_unwind_scratch: stack, depth, hash); returns the
 * number of frames, or -1 for a kernel thread. Callers keep it with loupe_unwind_store()
 * (a stack id) or loupe_unwind_copy() (into an event), before anything else walks on this
 * CPU.
 *
 * A global function: the verifier checks it once, on its own, instead of once per call
 * site inlined into the caller; with two call sites in offcpu's sched_switch program
 * (switch-out and run-queue blocker) inlined, 6.1 (and 6.18 for raw_tp and tracepoint)
 * hit the 1M-instruction bound. */
__attribute__((noinline)) int loupe_unwind_user_walk(void)
{
	struct task_struct *task = bpf_get_current_task_btf();
	struct loupe_unwind_counters *c = loupe_unwind_counters();
	const struct loupe_unwind_proc *proc;
	const struct loupe_python_proc *py;
	struct loupe_unwind_state *st;
	struct pt_regs *regs;
	__u32 zero = 0;

	st = bpf_map_lookup_elem(&loupe_unwind_scratch, &zero);
	if (!st || !c)
		return -1;
	/* Plain loads, not BPF_CORE_READ: the task and its registers are BTF pointers the
	 * verifier lets a program read directly, and each helper call of a probe read cost
	 * about as much as a row lookup (five of them a walk). */
	if (!task->mm) {
		c->no_regs++;
		return -1;
	}
	regs = (struct pt_regs *)bpf_task_pt_regs(task);
	st->pc = regs->ip;
	st->sp = regs->sp;
	st->bp = regs->bp;
	st->leaf_di = regs->di;
	st->leaf_r13 = regs->r13;
	st->tgid = bpf_get_current_pid_tgid() >> 32;
	st->depth = 0;
	st->done = 0;
	st->fp_walked = 0;
	st->stop = LOUPE_UNWIND_STOP_NONE;
	st->table_frames = st->fp_frames = st->plt_frames = st->vma_frames = 0;
	st->last_map.start = st->last_map.end = 0;
	st->win_base[1] = 0;
	st->win_len[1] = 0;
	st->win_base[0] = st->sp;
	st->win_len[0] = LOUPE_UNWIND_PAGE - (st->sp & (LOUPE_UNWIND_PAGE - 1));
	if (st->win_len[0] > LOUPE_UNWIND_PAGE ||
	    bpf_probe_read_user(st->win[0], st->win_len[0], (void *)st->sp))
		st->win_len[0] = 0;
	proc = bpf_map_lookup_elem(&loupe_unwind_procs, &st->tgid);
	st->no_proc = proc == NULL;
	st->py_on = 0;
	if (proc && (proc->flags & LOUPE_UNWIND_PROC_PYTHON)) {
		py = bpf_map_lookup_elem(&loupe_python_procs, &st->tgid);
		if (py) {
			__builtin_memcpy(&st->py, py, sizeof(st->py));
			st->py_on = 1;
		}
	}
	st->hs_on = 0;
	if (proc && (proc->flags & LOUPE_UNWIND_PROC_HOTSPOT)) {
		const struct loupe_hotspot_proc *hs =
		    bpf_map_lookup_elem(&loupe_hotspot_procs, &st->tgid);

		if (hs) {
			__builtin_memcpy(&st->hs, hs, sizeof(st->hs));
			st->hs_on = 1;
		}
	}
	st->v8_on = 0;
	if (proc && (proc->flags & LOUPE_UNWIND_PROC_V8)) {
		const struct loupe_v8_proc *v8 = bpf_map_lookup_elem(&loupe_v8_procs, &st->tgid);

		if (v8) {
			__builtin_memcpy(&st->v8, v8, sizeof(st->v8));
			st->v8_on = 1;
		}
	}
	st->v8_frames = 0;
	st->hs_frames = st->hs_lost = 0;
	st->py_init = st->py_done_pc = st->py_frames = st->py_stop = st->rt_lost = 0;
	st->py_frame = 0;
	st->nat = 0;
	st->hash = 0xcbf29ce484222325ULL ^ st->tgid;
	c->walks++;
	bpf_loop(LOUPE_UNWIND_MAX_DEPTH, loupe_unwind_step, &zero, 0);
	if (!st->done)
		c->depth_bound++;
	c->frames += st->depth;
	c->table_frames += st->table_frames;
	c->fp_frames += st->fp_frames;
	c->plt_frames += st->plt_frames;
	c->vma_frames += st->vma_frames;
	c->no_process += st->fp_walked;
	c->python_frames += st->py_frames;
	c->python_stacks += st->py_frames > 0;
	c->python_no_thread += st->py_stop == 1;
	c->python_read_failed += st->py_stop == 2;
	c->runtime_seen_lost += st->rt_lost;
	c->hotspot_frames += st->hs_frames;
	c->hotspot_stacks += st->hs_frames > 0;
	c->hotspot_lost += st->hs_lost;
	c->v8_frames += st->v8_frames;
	c->v8_stacks += st->v8_frames > 0;
	switch (st->stop) {
	case LOUPE_UNWIND_STOP_END:
		c->end_of_stack++;
		break;
	case LOUPE_UNWIND_STOP_FP:
		c->fp_stopped++;
		break;
	case LOUPE_UNWIND_STOP_UNSUPPORTED:
		c->unsupported++;
		break;
	case LOUPE_UNWIND_STOP_SIGNAL:
		c->signal_frames++;
		break;
	case LOUPE_UNWIND_STOP_BAD_FRAME:
		c->bad_frame++;
		break;
	case LOUPE_UNWIND_STOP_READ_FAILED:
		c->read_failed++;
		break;
	}
	if (st->depth < LOUPE_UNWIND_MAX_DEPTH)
		st->stack.addrs[st->depth] = 0;
	return (int)st->depth;
}

/* The current task's user stack, unwound and stored once: its id in loupe_unwind_stacks,
 * or -1 (a kernel thread, or the store full: counted). Global for the same reason. */
__attribute__((noinline)) int loupe_unwind_user_stack(void)
{
	struct loupe_unwind_counters *c = loupe_unwind_counters();
	struct loupe_unwind_state *st;
	__u32 zero = 0;

	if (loupe_unwind_user_walk() < 0)
		return -1;
	st = bpf_map_lookup_elem(&loupe_unwind_scratch, &zero);
	if (!st || !c)
		return -1;
	return loupe_unwind_store(st, c);
}

/* The current task's user stack, unwound into `dst` (`size` bytes, a constant: an event's
 * array of __u64, leaf first): as bpf_get_stack(BPF_F_USER_STACK) does, the bytes written,
 * or a negative value when there is no user stack. A stack deeper than dst holds is cut
 * there, counted (event_cut). For events that carry their stack instead of an id. */
static __always_inline long loupe_unwind_user_copy(void *dst, __u32 size)
{
	struct loupe_unwind_state *st;
	__u32 zero = 0;
	long n = loupe_unwind_user_walk();

	if (n < 0)
		return -1;
	st = bpf_map_lookup_elem(&loupe_unwind_scratch, &zero);
	if (!st)
		return -1;
	if (size > sizeof(st->stack.addrs))
		size = sizeof(st->stack.addrs);
	n *= sizeof(__u64);
	if (n > size) {
		/* Deeper than the event holds (Python frames make stacks deeper): said. */
		struct loupe_unwind_counters *c = loupe_unwind_counters();

		if (c)
			c->event_cut++;
		n = size;
	}
	/* Past a stack shorter than dst: its 0 terminator, then stale frames (read n). */
	if (bpf_probe_read_kernel(dst, size, st->stack.addrs))
		return -1;
	return n;
}

#endif /* LOUPE_UNWIND_BPF_H */
