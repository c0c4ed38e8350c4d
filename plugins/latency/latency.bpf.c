// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * Entry/exit latency pairs for any number of targets with one set of programs per
 * mechanism: the target index travels in the attach cookie (uprobe, kprobe, tracepoint
 * perf links), so N targets share the same code and the same maps.
 */
#include "vmlinux.h"
#include <bpf/bpf_core_read.h>
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>
#include <bpf/usdt.bpf.h>

#include "loupe/emit.bpf.h"
#include "loupe/filter.bpf.h"
#include "loupe/hist.bpf.h"
#include "loupe/unwind.bpf.h"
#include "loupe/ustack.bpf.h"
#include "latency.h"

const volatile __u32 targ_nesting = LAT_NEST_OUTERMOST;
const volatile __u64 targ_max_age_ns = 10ULL * 1000 * 1000 * 1000;
const volatile __u64 targ_min_duration_ns = 0;
const volatile __u64 targ_outlier_ns = 0; /* 0 = no outlier events */
const volatile bool targ_outlier_stacks = false;
/* Outlier user stacks as copies unwound in user space (unwind = "dwarf"). */
const volatile bool targ_outlier_dwarf = false;
/* Outlier user stacks by the in-kernel unwinder (unwind = "tables"), else frame pointers. */
const volatile bool targ_outlier_tables = false;
const volatile bool targ_linear = false;
const volatile bool targ_per_pid = false;
const volatile bool targ_per_comm = false;
/* fentry programs cannot share code across functions: slot -> target index. */
const volatile __u32 targ_fentry_target[LAT_FENTRY_SLOTS] = {};
/* USDT targets with an argument as label: 1 + its index (0 = no label), and whether it
 * is a pointer to a string. */
const volatile __u8 targ_label_arg[LAT_MAX_TARGETS] = {};
const volatile bool targ_label_str[LAT_MAX_TARGETS] = {};
/* USDT targets whose probe has one site: 1 + its offset in the probed file (0 = several
 * sites, found per call from the address that fired). */
const volatile __u64 targ_one_site[LAT_MAX_TARGETS] = {};

/* In-flight calls; user space sizes it (max_entries) and sweeps stale entries. */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 10240);
	__type(key, struct lat_start_key);
	__type(value, struct lat_start_val);
} starts SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, LAT_MAX_TARGETS);
	__type(key, __u32);
	__type(value, struct loupe_hist);
} hists SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, LAT_MAX_TARGETS);
	__type(key, __u32);
	__type(value, struct lat_counters);
} counters SEC(".maps");

/* Optional per-pid / per-comm histograms; max_entries is the cardinality limit. */
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_HASH);
	__uint(max_entries, 1);
	__type(key, struct lat_breakdown_key);
	__type(value, struct loupe_hist);
} breakdown SEC(".maps");

/* Never written: the zeroed value a new breakdown entry starts from (too big for the
 * 512-byte BPF stack). */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct loupe_hist);
} zero_hist SEC(".maps");

/* Labelled USDT targets: the label of each open level (sized like starts), then one
 * histogram (pairs) or count (single probes) per label; max_entries bounds the labels. */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 1);
	__type(key, struct lat_start_key);
	__type(value, struct lat_level_labels);
} start_labels SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_HASH);
	__uint(max_entries, 1);
	__type(key, struct lat_label_key);
	__type(value, struct loupe_hist);
} label_hists SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_HASH);
	__uint(max_entries, 1);
	__type(key, struct lat_label_key);
	__type(value, __u64);
} label_counts SEC(".maps");

/* USDT calls per (target, site); user space sizes it to the sites it attached plus one
 * unknown site per target, so it fills only if the kernel fires a site the notes lack. */
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_HASH);
	__uint(max_entries, 1);
	__type(key, struct lat_site_key);
	__type(value, __u64);
} site_counts SEC(".maps");

/* Executables the target exec'd (user space sizes it when a user probe exists), and the
 * execs that found it full. */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 1);
	__type(key, struct lat_exec_key);
	__type(value, struct lat_exec_val);
} execs SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, __u64);
} execs_lost SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct lat_exec_val);
} exec_scratch SEC(".maps");

/* Scratch: a zeroed lat_level_labels / lat_label_key (too big for the BPF stack). */
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct lat_level_labels);
} zero_labels SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct lat_label_key);
} label_scratch SEC(".maps");

LOUPE_RING(outliers, 256 * 1024);
/* unwind = "dwarf": outliers with their stack copies (user space shrinks both when off). */
LOUPE_RING(outliers_dwarf, 2 * 1024 * 1024);
LOUPE_USTACK_SCRATCH(dwarf_scratch, struct lat_outlier_dwarf);

#define LAT_EEXIST 17

/* Inserts `init` under `key` unless a racing CPU already did; false when the map refused
 * it (full: -E2BIG, or out of memory). */
static __always_inline bool insert_or_exists(void *map, const void *key, const void *init)
{
	long err = bpf_map_update_elem(map, key, init, BPF_NOEXIST);

	return err == 0 || err == -LAT_EEXIST;
}

static __always_inline void record_breakdown(__u32 target, __u64 pid_tgid, __u64 delta,
					     struct lat_counters *c)
{
	struct lat_breakdown_key key = {.target = target};
	struct loupe_hist *h;
	__u32 zero = 0;
	void *init;

	if (targ_per_pid)
		key.pid = pid_tgid >> 32;
	if (targ_per_comm)
		bpf_get_current_comm(key.comm, sizeof(key.comm));
	h = bpf_map_lookup_elem(&breakdown, &key);
	if (!h) {
		init = bpf_map_lookup_elem(&zero_hist, &zero);
		/* -EEXIST from a racing CPU is fine: the lookup below finds its entry. Any
		 * other failure (a full map, -E2BIG) leaves the call in the target total only. */
		if (init && insert_or_exists(&breakdown, &key, init))
			h = bpf_map_lookup_elem(&breakdown, &key);
		if (!h) {
			c->breakdown_overflow++;
			return;
		}
	}
	loupe_hist_add(h, delta, targ_linear);
}

/* An outlier with the user registers and a slice of the user stack: from the probe's own
 * registers in a uprobe (`user_ctx`), else the task's saved user registers. */
static __always_inline void emit_outlier_dwarf(void *ctx, bool user_ctx, __u32 target,
					       __u64 pid_tgid, __u64 delta, __u32 depth,
					       struct lat_counters *c)
{
	struct lat_outlier_dwarf *r = loupe_ustack_scratch(&dwarf_scratch);
	__u64 size;
	long n;

	if (!r)
		return;
	r->e.type = LAT_RECORD_OUTLIER_DWARF;
	r->e.version = LAT_RECORD_OUTLIER_DWARF_VERSION;
	r->e.boot_ns = bpf_ktime_get_boot_ns();
	r->e.duration_ns = delta;
	r->e.pid = pid_tgid >> 32;
	r->e.tid = (__u32)pid_tgid;
	r->e.target = target;
	r->e.depth = depth;
	bpf_get_current_comm(r->e.comm, sizeof(r->e.comm));
	r->e.n_user = 0;
	n = bpf_get_stack(ctx, r->e.kernel_stack, sizeof(r->e.kernel_stack), 0);
	r->e.n_kernel = n < 0 ? n : (__s32)((__u64)n >> 3);
	r->us.stack_len = 0;
	r->us.flags = 0;
	if (user_ctx ? loupe_ustack_regs_pt(ctx, &r->us) : loupe_ustack_regs_task(&r->us))
		loupe_ustack_copy(&r->us, (__u8 *)(r + 1));
	size = loupe_ustack_record_len(sizeof(*r), &r->us);
	r->e.len = size;
	if (loupe_output(&outliers_dwarf, &outliers_dwarf_lost, r, size) == 0)
		c->outliers++;
}

static __always_inline void emit_outlier(void *ctx, __u32 target, __u64 pid_tgid, __u64 delta,
					 __u32 depth, struct lat_counters *c)
{
	struct lat_outlier_event *e;
	long n;

	if (loupe_sampled_out(&outliers_divisor)) {
		c->outliers_sampled_out++;
		return;
	}
	e = LOUPE_RESERVE(outliers, struct lat_outlier_event, LAT_RECORD_OUTLIER,
			  LAT_RECORD_OUTLIER_VERSION);
	if (!e)
		return; /* counted in outliers_lost by loupe_reserve() */
	e->boot_ns = bpf_ktime_get_boot_ns();
	e->duration_ns = delta;
	e->pid = pid_tgid >> 32;
	e->tid = (__u32)pid_tgid;
	e->target = target;
	e->depth = depth;
	bpf_get_current_comm(e->comm, sizeof(e->comm));
	e->n_user = 0;
	e->n_kernel = 0;
	if (targ_outlier_stacks) {
		/* Both walk the task's saved user registers: at a uretprobe the kernel has put
		 * back the return address and popped it, so the leaf is the probed function's
		 * caller. */
		if (targ_outlier_tables)
			n = loupe_unwind_user_copy(e->user_stack, sizeof(e->user_stack));
		else
			n = bpf_get_stack(ctx, e->user_stack, sizeof(e->user_stack),
					  BPF_F_USER_STACK);
		e->n_user = n < 0 ? n : (__s32)((__u64)n >> 3);
		n = bpf_get_stack(ctx, e->kernel_stack, sizeof(e->kernel_stack), 0);
		e->n_kernel = n < 0 ? n : (__s32)((__u64)n >> 3);
	}
	LOUPE_SUBMIT(outliers, e);
	c->outliers++;
}

static __always_inline int lat_enter(__u32 target)
{
	__u64 pid_tgid = bpf_get_current_pid_tgid();
	struct lat_start_key key = {};
	struct lat_start_val *v;
	struct lat_counters *c;
	__u64 now;
	__u32 d;

	if (target >= LAT_MAX_TARGETS || !loupe_filter_pass(pid_tgid))
		return 0;
	c = bpf_map_lookup_elem(&counters, &target);
	if (!c)
		return 0;
	c->calls++;
	now = bpf_ktime_get_ns();
	key.pid_tgid = pid_tgid;
	key.target = target;
	v = bpf_map_lookup_elem(&starts, &key);
	if (!v) {
		struct lat_start_val init = {};

		init.depth = 1;
		init.ts[0] = now;
		if (bpf_map_update_elem(&starts, &key, &init, BPF_ANY))
			c->map_full++;
		return 0;
	}
	/* The outermost call of this thread lost its exit (longjmp, killed thread, a
	 * probe attached mid-call): start over instead of timing against it. */
	if (v->depth == 0 || now - v->ts[0] > targ_max_age_ns) {
		if (v->depth)
			c->expired++;
		v->depth = 1;
		v->ts[0] = now;
		return 0;
	}
	d = v->depth;
	if (targ_nesting == LAT_NEST_EVERY && d < LAT_MAX_DEPTH)
		v->ts[d] = now;
	v->depth = d + 1;
	return 0;
}

/* `timed` (may be NULL) gets the duration recorded in the target's histogram, else 0. */
static __always_inline int lat_exit_timed(void *ctx, __u32 target, __u64 *timed, bool user_ctx)
{
	__u64 pid_tgid = bpf_get_current_pid_tgid();
	struct lat_start_key key = {};
	struct lat_start_val *v;
	struct lat_counters *c;
	struct loupe_hist *h;
	__u64 now, ts, delta;
	__u32 d;

	if (target >= LAT_MAX_TARGETS || !loupe_filter_pass(pid_tgid))
		return 0;
	c = bpf_map_lookup_elem(&counters, &target);
	if (!c)
		return 0;
	key.pid_tgid = pid_tgid;
	key.target = target;
	v = bpf_map_lookup_elem(&starts, &key);
	/* No slot: this thread's entry was never seen, so the call began before the entry
	 * probe was attached (exits are attached first), which loses nothing. A slot at depth
	 * 0 is a thread whose calls were paired before: its entry was lost. */
	if (!v) {
		c->began_before_attach++;
		return 0;
	}
	if (v->depth == 0) {
		c->unmatched_exits++;
		return 0;
	}
	now = bpf_ktime_get_ns();
	c->matched++;
	d = v->depth - 1; /* the level this exit closes; 0 = outermost */
	if (d == 0) {
		/* The entry stays, idle (depth 0), for this thread's next call: reusing it
		 * saves a hash insert and delete per call. collect() sweeps idle entries. */
		ts = v->ts[0];
		v->depth = 0;
	} else {
		v->depth = d;
		if (targ_nesting != LAT_NEST_EVERY)
			return 0;
		if (d >= LAT_MAX_DEPTH) {
			c->depth_overflow++;
			return 0;
		}
		ts = v->ts[d];
	}
	delta = now - ts;
	if ((__s64)delta < 0 || delta > targ_max_age_ns) {
		c->discarded++;
		return 0;
	}
	if (delta < targ_min_duration_ns) {
		c->below_min++;
		return 0;
	}
	h = bpf_map_lookup_elem(&hists, &target);
	if (h)
		loupe_hist_add(h, delta, targ_linear);
	if (timed)
		*timed = delta;
	if (targ_per_pid || targ_per_comm)
		record_breakdown(target, pid_tgid, delta, c);
	if (targ_outlier_ns && delta >= targ_outlier_ns) {
		if (targ_outlier_dwarf && targ_outlier_stacks)
			emit_outlier_dwarf(ctx, user_ctx, target, pid_tgid, delta, d + 1, c);
		else
			emit_outlier(ctx, target, pid_tgid, delta, d + 1, c);
	}
	return 0;
}

static __always_inline int lat_exit(void *ctx, __u32 target)
{
	return lat_exit_timed(ctx, target, NULL, false);
}

/* A uprobe's exit: its registers are the user's (for dwarf outlier stacks). */
static __always_inline int lat_exit_user(void *ctx, __u32 target)
{
	return lat_exit_timed(ctx, target, NULL, true);
}

/* `target` masked behind a compiler barrier: once inlined after lat_enter's check the
 * compiler drops a plain mask and indexes with a copy the verifier has no bound for. */
static __always_inline __u32 bounded(__u32 v, __u32 pow2)
{
	barrier_var(v);
	return v & (pow2 - 1);
}

static __always_inline __u32 bounded_target(__u32 target)
{
	return bounded(target, LAT_MAX_TARGETS);
}

static __always_inline __u8 label_arg_of(__u32 target)
{
	return target < LAT_MAX_TARGETS ? targ_label_arg[bounded_target(target)] : 0;
}

/* The label a USDT probe's argument gives; false when the target has none or the
 * argument cannot be read (then the target total alone counts the call). */
static __always_inline bool read_label(struct pt_regs *ctx, __u32 target, struct lat_label *l)
{
	long v = 0;
	__u8 arg;

	arg = label_arg_of(target);
	if (!arg || bpf_usdt_arg(ctx, arg - 1, &v))
		return false;
	if (targ_label_str[bounded_target(target)]) {
		l->num = 0;
		if (bpf_probe_read_user_str(l->str, sizeof(l->str), (const void *)v) < 0)
			return false;
	} else {
		l->num = v;
	}
	return true;
}

static __always_inline struct lat_label_key *label_key(__u32 target)
{
	__u32 zero = 0;
	struct lat_label_key *k = bpf_map_lookup_elem(&label_scratch, &zero);

	if (k) {
		__builtin_memset(k, 0, sizeof(*k));
		k->target = target;
	}
	return k;
}

/* One more count (single probe) or duration (pair) for the key's label; a full map is
 * counted. */
static __always_inline void record_label(struct lat_label_key *k, __u64 delta, bool pair,
					 struct lat_counters *c)
{
	__u32 zero = 0;
	void *init;

	if (!pair) {
		__u64 one = 1, *n = bpf_map_lookup_elem(&label_counts, k);

		if (n) {
			(*n)++;
			return;
		}
		/* A racing CPU's insert of the same label: add to its entry. */
		if (bpf_map_update_elem(&label_counts, k, &one, BPF_NOEXIST) == 0)
			return;
		n = bpf_map_lookup_elem(&label_counts, k);
		if (n)
			(*n)++;
		else
			c->label_overflow++;
		return;
	}
	struct loupe_hist *h = bpf_map_lookup_elem(&label_hists, k);
	if (!h) {
		init = bpf_map_lookup_elem(&zero_hist, &zero);
		if (init && insert_or_exists(&label_hists, k, init))
			h = bpf_map_lookup_elem(&label_hists, k);
		if (!h) {
			c->label_overflow++;
			return;
		}
	}
	loupe_hist_add(h, delta, targ_linear);
}

/* A single-probe target: how often it fired (filters applied), no duration. */
static __always_inline int lat_count(__u32 target)
{
	__u64 pid_tgid = bpf_get_current_pid_tgid();
	struct lat_counters *c;

	if (target >= LAT_MAX_TARGETS || !loupe_filter_pass(pid_tgid))
		return 0;
	c = bpf_map_lookup_elem(&counters, &target);
	if (c)
		c->calls++;
	return 0;
}

struct site_lookup {
	__u64 ip;
	__u64 file_offset;
};

/* bpf_find_vma's callback: the offset of `ip` in the file the mapping holding it maps. */
static long site_in_vma(struct task_struct *task, struct vm_area_struct *vma, void *data)
{
	struct site_lookup *s = data;

	if (vma->vm_file)
		s->file_offset = s->ip - vma->vm_start + (vma->vm_pgoff << 12);
	return 0;
}

/* One more call of the site that fired, keyed by its offset in the probed file rather than
 * by process and address: the count per site does not grow a key per process. */
static __always_inline void count_site(struct pt_regs *ctx, __u32 target, __u64 pid_tgid)
{
	struct site_lookup s = {.ip = PT_REGS_IP(ctx), .file_offset = LAT_SITE_UNKNOWN};
	struct lat_site_key key = {.target = target};
	struct lat_counters *c;
	__u64 one = 1, *n;

	if (target >= LAT_MAX_TARGETS || !loupe_filter_pass(pid_tgid))
		return;
	c = bpf_map_lookup_elem(&counters, &target);
	if (!c)
		return;
	/* One site: no lookup (bpf_find_vma costs ~100 ns a call). The lookup fails (-EBUSY)
	 * only while another thread of the process holds its mmap lock. */
	if (targ_one_site[bounded_target(target)])
		s.file_offset = targ_one_site[bounded_target(target)] - 1;
	else
		bpf_find_vma(bpf_get_current_task_btf(), s.ip, site_in_vma, &s, 0);
	key.file_offset = s.file_offset;
	if (key.file_offset == LAT_SITE_UNKNOWN)
		c->site_unresolved++;
	n = bpf_map_lookup_elem(&site_counts, &key);
	if (n) {
		(*n)++;
		return;
	}
	if (bpf_map_update_elem(&site_counts, &key, &one, BPF_NOEXIST) == 0)
		return;
	n = bpf_map_lookup_elem(&site_counts, &key);
	if (n)
		(*n)++;
	else
		c->sites_lost++;
}

/* USDT probes: libbpf keeps its own attach cookie for the probe's argument spec; ours is
 * the usdt cookie. Every site of a probe name is one uprobe under the same link. */
SEC("usdt")
int lat_usdt_entry(struct pt_regs *ctx)
{
	__u32 target = (__u32)bpf_usdt_cookie(ctx);
	__u64 pid_tgid = bpf_get_current_pid_tgid();
	struct lat_start_key key = {.pid_tgid = pid_tgid, .target = target};
	struct lat_level_labels *labels;
	struct lat_start_val *v;
	__u32 zero = 0, d;

	lat_enter(target);
	count_site(ctx, target, pid_tgid);
	if (!label_arg_of(target) || !loupe_filter_pass(pid_tgid))
		return 0;
	/* The level lat_enter just opened carries this entry's label to its exit. */
	v = bpf_map_lookup_elem(&starts, &key);
	if (!v || v->depth == 0 || v->depth > LAT_MAX_DEPTH)
		return 0;
	d = v->depth - 1;
	labels = bpf_map_lookup_elem(&start_labels, &key);
	if (!labels) {
		void *init = bpf_map_lookup_elem(&zero_labels, &zero);

		if (init && bpf_map_update_elem(&start_labels, &key, init, BPF_ANY) == 0)
			labels = bpf_map_lookup_elem(&start_labels, &key);
		if (!labels) {
			/* Sized like the correlation map: full when it is. The call is timed
			 * in the target total; its label is lost, counted with map_full. */
			struct lat_counters *c = bpf_map_lookup_elem(&counters, &target);

			if (c)
				c->map_full++;
			return 0;
		}
	}
	d = bounded(d, LAT_MAX_DEPTH);
	if (!read_label(ctx, target, &labels->level[d])) {
		struct lat_counters *c = bpf_map_lookup_elem(&counters, &target);

		/* Timed under the empty label (the zero value), and said so. */
		__builtin_memset(&labels->level[d], 0, sizeof(labels->level[d]));
		if (c)
			c->label_unreadable++;
	}
	return 0;
}

SEC("usdt")
int lat_usdt_exit(struct pt_regs *ctx)
{
	__u32 target = (__u32)bpf_usdt_cookie(ctx);
	struct lat_start_key key = {.pid_tgid = bpf_get_current_pid_tgid(), .target = target};
	struct lat_level_labels *labels;
	struct lat_label_key *k = NULL;
	struct lat_start_val *v;
	struct lat_counters *c;
	__u64 delta = 0;
	__u32 d;

	if (label_arg_of(target)) {
		/* The label of the level this exit closes, read before lat_exit closes it. */
		v = bpf_map_lookup_elem(&starts, &key);
		labels = bpf_map_lookup_elem(&start_labels, &key);
		if (v && labels && v->depth > 0 && v->depth <= LAT_MAX_DEPTH) {
			d = bounded(v->depth - 1, LAT_MAX_DEPTH);
			k = label_key(target);
			if (k)
				__builtin_memcpy(&k->label, &labels->level[d], sizeof(k->label));
		}
	}
	lat_exit_timed(ctx, target, &delta, true);
	if (k && delta) {
		c = bpf_map_lookup_elem(&counters, &target);
		if (c)
			record_label(k, delta, true, c);
	}
	return 0;
}

SEC("usdt")
int lat_usdt_count(struct pt_regs *ctx)
{
	__u32 target = (__u32)bpf_usdt_cookie(ctx);
	struct lat_label_key *k;
	struct lat_counters *c;

	lat_count(target);
	count_site(ctx, target, bpf_get_current_pid_tgid());
	if (!label_arg_of(target) || !loupe_filter_pass(bpf_get_current_pid_tgid()))
		return 0;
	k = label_key(target);
	c = bpf_map_lookup_elem(&counters, &target);
	if (!k || !c)
		return 0;
	if (read_label(ctx, target, &k->label))
		record_label(k, 0, false, c);
	else
		c->label_unreadable++;
	return 0;
}

/* The target's execs: the executables its processes ran, for the report of a user probe
 * that never fired (its binary may not be what the target runs). */
SEC("tracepoint/sched/sched_process_exec")
int lat_exec(struct trace_event_raw_sched_process_exec *ctx)
{
	struct task_struct *task = bpf_get_current_task_btf();
	struct lat_exec_key key = {};
	struct lat_exec_val *v;
	struct inode *inode;
	__u32 zero = 0;
	__u64 *lost;

	if (!loupe_filter_pass(bpf_get_current_pid_tgid()))
		return 0;
	inode = BPF_CORE_READ(task, mm, exe_file, f_inode);
	if (!inode)
		return 0;
	key.ino = BPF_CORE_READ(inode, i_ino);
	key.dev = BPF_CORE_READ(inode, i_sb, s_dev);
	v = bpf_map_lookup_elem(&execs, &key);
	if (v) {
		__sync_fetch_and_add(&v->count, 1);
		return 0;
	}
	v = bpf_map_lookup_elem(&exec_scratch, &zero);
	if (!v)
		return 0;
	v->count = 1;
	bpf_probe_read_kernel_str(v->path, sizeof(v->path),
				  (void *)ctx + (ctx->__data_loc_filename & 0xffff));
	if (insert_or_exists(&execs, &key, v))
		return 0;
	lost = bpf_map_lookup_elem(&execs_lost, &zero);
	if (lost)
		(*lost)++;
	return 0;
}

SEC("uprobe")
int lat_uprobe_entry(struct pt_regs *ctx)
{
	return lat_enter((__u32)bpf_get_attach_cookie(ctx));
}

SEC("uretprobe")
int lat_uprobe_exit(struct pt_regs *ctx)
{
	return lat_exit_user(ctx, (__u32)bpf_get_attach_cookie(ctx));
}

SEC("kprobe")
int lat_kprobe_entry(struct pt_regs *ctx)
{
	return lat_enter((__u32)bpf_get_attach_cookie(ctx));
}

SEC("kretprobe")
int lat_kprobe_exit(struct pt_regs *ctx)
{
	return lat_exit(ctx, (__u32)bpf_get_attach_cookie(ctx));
}

SEC("tracepoint")
int lat_tp_entry(void *ctx)
{
	return lat_enter((__u32)bpf_get_attach_cookie(ctx));
}

SEC("tracepoint")
int lat_tp_exit(void *ctx)
{
	return lat_exit(ctx, (__u32)bpf_get_attach_cookie(ctx));
}

#define LAT_FENTRY_SLOT(n)                                                                         \
	SEC("fentry")                                                                              \
	int lat_fentry_##n(void *ctx)                                                              \
	{                                                                                          \
		return lat_enter(targ_fentry_target[n]);                                           \
	}                                                                                          \
	SEC("fexit")                                                                               \
	int lat_fexit_##n(void *ctx)                                                               \
	{                                                                                          \
		return lat_exit(ctx, targ_fentry_target[n]);                                       \
	}

LAT_FENTRY_SLOT(0)
LAT_FENTRY_SLOT(1)
LAT_FENTRY_SLOT(2)
LAT_FENTRY_SLOT(3)

char LICENSE[] SEC("license") = "Dual BSD/GPL";
