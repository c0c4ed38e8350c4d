// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * File I/O per file: the file syscalls of the target (raw_syscalls:sys_enter/sys_exit,
 * x86_64 numbers), each charged to the file its fd names (device and inode, read through
 * CO-RE from the task's fd table at the call) with its latency, bytes and errors. The
 * file's path is spelled from its dentries in the kernel at the call (bounded, across
 * mounts), so files and processes that are gone by the report still have names.
 */
#include "vmlinux.h"
#include <bpf/bpf_core_read.h>
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>

#include "loupe/emit.bpf.h"
#include "loupe/filter.bpf.h"
#include "loupe/hist.bpf.h"
#include "loupe/map.bpf.h"
#include "loupe/task_file.bpf.h"
#include "loupe/unwind.bpf.h"
#include "loupe/ustack.bpf.h"
#include "fileio.h"

const volatile bool targ_regular_only = true;
const volatile __u64 targ_slow_ns = 0; /* 0 = no slow-operation events */
const volatile bool targ_slow_dwarf = false;
/* Slow-event user stacks by the in-kernel unwinder (unwind = "tables"), else frame pointers. */
const volatile bool targ_slow_tables = false;

#define AT_EMPTY_PATH 0x1000
#define NO_OFFSET ((__u64)-1)

/* How a call names its file. */
enum how {
	BY_FD = 1,	/* args[0] is the fd */
	BY_RET = 2,	/* open: the returned fd */
	BY_STATBUF = 3, /* stat by path: the identity the kernel wrote into the user's buffer */
};

struct inflight {
	__u64 ts;
	__u64 ino;
	__u64 offset;
	__u64 requested;
	__u64 statbuf; /* BY_STATBUF: the user's struct stat / statx */
	__u64 name;    /* BY_STATBUF: the user's path string */
	__u32 dev;
	__u16 op;
	__u16 how;
	__u32 statx; /* BY_STATBUF: the buffer is a struct statx */
	__u32 pad;
};

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 10240); /* max_threads */
	__type(key, __u32);	    /* tid */
	__type(value, struct inflight);
} inflight SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 16384); /* max_files x ops */
	__type(key, struct fio_key);
	__type(value, struct fio_stats);
} stats SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 8192); /* max_files */
	__type(key, struct fio_file);
	__type(value, struct fio_path);
} paths SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct fio_path);
} path_scratch SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 4096); /* max_files */
	__type(key, struct fio_err_key);
	__type(value, __u64);
} errnos SEC(".maps");

LOUPE_RING(slow, 1024 * 1024);
LOUPE_USTACK_SCRATCH(slow_scratch, struct fio_slow_dwarf);

/* Never written: the zero value new stats start from. */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct fio_stats);
} zero_stats SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct fio_counters);
} counters SEC(".maps");

static __always_inline struct fio_counters *get_counters(void)
{
	__u32 zero = 0;

	return bpf_map_lookup_elem(&counters, &zero);
}

/* x86_64 syscall numbers: the operation, and how the call names its file. */
static __always_inline __u32 op_of(long nr, __u16 *how)
{
	*how = BY_FD;
	switch (nr) {
	case 0:	  /* read */
	case 17:  /* pread64 */
	case 19:  /* readv */
	case 295: /* preadv */
	case 327: /* preadv2 */
		return FIO_OP_READ;
	case 1:	  /* write */
	case 18:  /* pwrite64 */
	case 20:  /* writev */
	case 296: /* pwritev */
	case 328: /* pwritev2 */
		return FIO_OP_WRITE;
	case 74: /* fsync */
	case 75: /* fdatasync */
		return FIO_OP_FSYNC;
	case 5: /* fstat */
		return FIO_OP_STAT;
	case 4:	  /* stat */
	case 6:	  /* lstat */
	case 262: /* newfstatat: glibc 2.33+ fstat() too (AT_EMPTY_PATH) */
	case 332: /* statx */
		*how = BY_STATBUF;
		return FIO_OP_STAT;
	case 3: /* close */
		return FIO_OP_CLOSE;
	case 2:	  /* open */
	case 85:  /* creat */
	case 257: /* openat */
	case 437: /* openat2 */
		*how = BY_RET;
		return FIO_OP_OPEN;
	}
	return 0;
}

/* Where the call starts in the file, and the size it asks for. */
static __always_inline void position_of(long nr, const struct trace_event_raw_sys_enter *ctx,
					struct file *f, struct inflight *in)
{
	in->offset = NO_OFFSET;
	in->requested = 0;
	switch (nr) {
	case 17: /* pread64, pwrite64: (fd, buf, count, pos) */
	case 18:
		in->requested = ctx->args[2];
		in->offset = ctx->args[3];
		return;
	case 295: /* preadv, pwritev, ...2: (fd, iov, cnt, pos_l, ...); -1 = the file's own */
	case 296:
	case 327:
	case 328:
		if ((long)ctx->args[3] != -1) {
			in->offset = ctx->args[3];
			return;
		}
		break;
	case 0: /* read, write */
	case 1:
		in->requested = ctx->args[2];
		break;
	case 19: /* readv, writev */
	case 20:
		break;
	default:
		return;
	}
	in->offset = BPF_CORE_READ(f, f_pos);
}

/* `f`'s device and inode; false when it is not a file to count. */
static __always_inline bool identify(struct file *f, struct fio_file *id, struct fio_counters *c)
{
	struct inode *inode = BPF_CORE_READ(f, f_inode);
	__u16 mode;

	if (!inode) {
		c->no_file++;
		return false;
	}
	mode = BPF_CORE_READ(inode, i_mode);
	if (targ_regular_only && (mode & 0170000) != 0100000 /* S_ISREG */) {
		c->not_regular++;
		return false;
	}
	id->ino = BPF_CORE_READ(inode, i_ino);
	id->dev = BPF_CORE_READ(inode, i_sb, s_dev);
	return true;
}

/* Spells `f`'s path into the paths map (replacing it when `update`). */
static __always_inline void record_path(struct file *f, const struct fio_file *id, bool update,
					struct fio_counters *c)
{
	__u32 zero = 0;
	struct fio_path *p;
	struct dentry *d, *root, *fs_root;
	struct vfsmount *vfs, *fs_mnt;
	struct mount *mnt, *parent;
	struct task_struct *task;

	if (!update && bpf_map_lookup_elem(&paths, id))
		return;
	p = bpf_map_lookup_elem(&path_scratch, &zero);
	if (!p)
		return;
	p->depth = 0;
	p->truncated = 0;
	p->given = 0;
	d = BPF_CORE_READ(f, f_path.dentry);
	vfs = BPF_CORE_READ(f, f_path.mnt);
	mnt = (struct mount *)((char *)vfs - bpf_core_field_offset(struct mount, mnt));
	/* Up to the process's own root, as d_path() does: a chroot or a container sees its
	 * paths from there. */
	task = (void *)bpf_get_current_task();
	fs_root = BPF_CORE_READ(task, fs, root.dentry);
	fs_mnt = BPF_CORE_READ(task, fs, root.mnt);
	for (int i = 0; i < FIO_PATH_DEPTH * 2; i++) {
		if (d == fs_root && vfs == fs_mnt)
			break;
		root = BPF_CORE_READ(vfs, mnt_root);
		if (d == root) {
			parent = BPF_CORE_READ(mnt, mnt_parent);
			if (parent == mnt)
				break; /* the root of the namespace */
			d = BPF_CORE_READ(mnt, mnt_mountpoint);
			mnt = parent;
			vfs = (struct vfsmount *)((char *)mnt +
						  bpf_core_field_offset(struct mount, mnt));
			continue;
		}
		__u32 at = p->depth;

		if (at >= FIO_PATH_DEPTH) {
			p->truncated = 1;
			break;
		}
		bpf_probe_read_kernel_str(p->comps[at & (FIO_PATH_DEPTH - 1)], FIO_NAME_LEN,
					  BPF_CORE_READ(d, d_name.name));
		p->depth = at + 1;
		d = BPF_CORE_READ(d, d_parent);
	}
	if (bpf_map_update_elem(&paths, id, p, BPF_ANY))
		c->paths_full++;
}

/* A file first seen through stat-by-path has no dentry here: it is named by the string it
 * was given (relative paths stay relative), until an open spells its real path. */
static __always_inline void record_given_path(const struct fio_file *id, __u64 name,
					      struct fio_counters *c)
{
	__u32 zero = 0;
	struct fio_path *p;

	if (bpf_map_lookup_elem(&paths, id))
		return;
	p = bpf_map_lookup_elem(&path_scratch, &zero);
	if (!p)
		return;
	long n = bpf_probe_read_user_str(p->comps[0], FIO_NAME_LEN, (const void *)name);

	p->depth = n > 0;
	p->given = 1;
	/* A name that filled the component was cut: say so (its tail is lost). */
	p->truncated = n >= FIO_NAME_LEN;
	if (bpf_map_update_elem(&paths, id, p, BPF_NOEXIST) && !bpf_map_lookup_elem(&paths, id))
		c->paths_full++;
}

/* The file a successful stat described, from the buffer the kernel filled: false when it
 * cannot be read or is not a file to count. */
static __always_inline bool identify_statbuf(const struct inflight *in, struct fio_file *id,
					     struct fio_counters *c)
{
	__u32 mode = 0, major, minor;

	if (in->statx) {
		/* struct statx: stx_mode @28 (u16), stx_ino @32, stx_dev_major/minor @136/140 */
		__u16 m;

		if (bpf_probe_read_user(&m, sizeof(m), (void *)(in->statbuf + 28)) ||
		    bpf_probe_read_user(&id->ino, 8, (void *)(in->statbuf + 32)) ||
		    bpf_probe_read_user(&major, 4, (void *)(in->statbuf + 136)) ||
		    bpf_probe_read_user(&minor, 4, (void *)(in->statbuf + 140)))
			return false;
		mode = m;
	} else {
		/* x86_64 struct stat: st_dev @0 (new_encode_dev), st_ino @8, st_mode @24 */
		__u64 dev;

		if (bpf_probe_read_user(&dev, 8, (void *)in->statbuf) ||
		    bpf_probe_read_user(&id->ino, 8, (void *)(in->statbuf + 8)) ||
		    bpf_probe_read_user(&mode, 4, (void *)(in->statbuf + 24)))
			return false;
		major = (dev >> 8) & 0xfff;
		minor = (dev & 0xff) | ((dev >> 12) & 0xfff00);
	}
	if (targ_regular_only && (mode & 0170000) != 0100000) {
		c->not_regular++;
		return false;
	}
	id->dev = major << 20 | minor;
	return true;
}

static __always_inline void count_errno(__u64 ino, __u32 dev, __u32 op, long ret,
					struct fio_counters *c)
{
	struct fio_err_key k = {.ino = ino, .dev = dev, .op = op, .err = (__u16)-ret};
	__u64 zero = 0, *n = loupe_lookup_or_init(&errnos, &k, &zero);

	if (n)
		__sync_fetch_and_add(n, 1);
	else
		c->errors_full++;
}

static __always_inline void fill_slow(struct fio_slow *e, const struct inflight *in, long ret,
				      __u64 delta)
{
	__u64 id = bpf_get_current_pid_tgid();

	e->boot_ns = bpf_ktime_get_boot_ns();
	e->latency_ns = delta;
	e->ino = in->ino;
	e->dev = in->dev;
	e->op = in->op;
	e->offset = in->offset;
	e->requested = in->requested;
	e->ret = ret;
	e->pid = id >> 32;
	e->tid = (__u32)id;
	e->n_user = 0;
	e->pad = 0;
	bpf_get_current_comm(e->comm, sizeof(e->comm));
}

/* fileslower's view: the operation with its file, position, size and the user stack. */
static __always_inline void emit_slow(void *ctx, const struct inflight *in, long ret, __u64 delta,
				      struct fio_counters *c)
{
	if (targ_slow_dwarf) {
		struct fio_slow_dwarf *r = loupe_ustack_scratch(&slow_scratch);
		__u64 size;

		if (!r)
			return;
		fill_slow(&r->e, in, ret, delta);
		r->e.type = FIO_RECORD_SLOW_DWARF;
		r->e.version = FIO_RECORD_SLOW_DWARF_VERSION;
		r->us.stack_len = 0;
		r->us.flags = 0;
		if (loupe_ustack_regs_task(&r->us))
			loupe_ustack_copy(&r->us, (__u8 *)(r + 1));
		size = loupe_ustack_record_len(sizeof(*r), &r->us);
		r->e.len = size;
		if (loupe_output(&slow, &slow_lost, r, size) == 0)
			c->slow++;
		return;
	}
	struct fio_slow *e =
	    LOUPE_RESERVE(slow, struct fio_slow, FIO_RECORD_SLOW, FIO_RECORD_SLOW_VERSION);
	long n;

	if (!e)
		return; /* counted in slow_lost */
	fill_slow(e, in, ret, delta);
	if (targ_slow_tables)
		n = loupe_unwind_user_copy(e->user_stack, sizeof(e->user_stack));
	else
		n = bpf_get_stack(ctx, e->user_stack, sizeof(e->user_stack), BPF_F_USER_STACK);
	e->n_user = n < 0 ? n : (__s32)((__u64)n >> 3);
	LOUPE_SUBMIT(slow, e);
	c->slow++;
}

static __always_inline void account(const struct inflight *in, long ret, __u64 delta,
				    struct fio_counters *c)
{
	struct fio_key k = {.ino = in->ino, .dev = in->dev, .op = in->op};
	struct fio_stats *s, *z;
	__u32 zero = 0;

	c->timed++;
	z = bpf_map_lookup_elem(&zero_stats, &zero);
	s = z ? loupe_lookup_or_init(&stats, &k, z) : NULL;
	if (!s) {
		c->stats_full++;
		return;
	}
	__sync_fetch_and_add(&s->count, 1);
	__sync_fetch_and_add(&s->total_ns, delta);
	if (ret < 0) {
		__sync_fetch_and_add(&s->errors, 1);
		count_errno(in->ino, in->dev, in->op, ret, c);
	} else if (in->op == FIO_OP_READ || in->op == FIO_OP_WRITE)
		__sync_fetch_and_add(&s->bytes, (__u64)ret);
	__sync_fetch_and_add(&s->slots[loupe_slot_bounded(loupe_log2_slot(delta), FIO_HIST_SLOTS)],
			     1);
	if (delta > s->max_ns)
		s->max_ns = delta;
}

/* The current thread's call in flight, taken out of the table, and the time it ends;
 * NULL when there is none (or the clock went back). */
static __always_inline struct fio_counters *take_inflight(struct inflight *in, __u64 *now)
{
	__u32 tid = (__u32)bpf_get_current_pid_tgid();
	struct inflight *p = bpf_map_lookup_elem(&inflight, &tid);
	struct fio_counters *c;

	if (!p)
		return NULL;
	*now = bpf_ktime_get_ns();
	*in = *p;
	bpf_map_delete_elem(&inflight, &tid);
	c = get_counters();
	return c && *now >= in->ts ? c : NULL;
}

SEC("tracepoint/raw_syscalls/sys_enter")
int fio_enter(struct trace_event_raw_sys_enter *ctx)
{
	__u64 id = bpf_get_current_pid_tgid();
	__u32 tid = (__u32)id;
	struct fio_counters *c;
	struct inflight in = {};
	struct fio_file fid = {};
	struct file *f;
	long nr = ctx->id;

	in.op = op_of(nr, &in.how);
	if (!in.op || !loupe_filter_pass(id))
		return 0;
	c = get_counters();
	if (!c)
		return 0;
	c->calls++;
	in.offset = NO_OFFSET;
	if (in.how == BY_STATBUF) {
		__u64 flags = 0;

		/* The context is read at constant offsets only. */
		if (nr == 262) { /* newfstatat(dfd, name, buf, flags) */
			in.name = ctx->args[1];
			in.statbuf = ctx->args[2];
			flags = ctx->args[3];
		} else if (nr == 332) { /* statx(dfd, name, flags, mask, buf) */
			in.statx = 1;
			in.name = ctx->args[1];
			flags = ctx->args[2];
			in.statbuf = ctx->args[4];
		} else { /* stat, lstat (name, buf) */
			in.name = ctx->args[0];
			in.statbuf = ctx->args[1];
		}
		if (flags & AT_EMPTY_PATH) {
			char first = 1;

			/* fstat() as glibc 2.33+ makes it: the fd's own file. */
			bpf_probe_read_user(&first, 1, (void *)in.name);
			if (!first)
				in.how = BY_FD;
		}
	}
	if (in.how == BY_FD) {
		/* The file now: after close the fd names nothing. */
		f = loupe_task_file((long)ctx->args[0]);
		if (!f) {
			c->no_file++;
			return 0;
		}
		if (!identify(f, &fid, c))
			return 0;
		record_path(f, &fid, false, c);
		in.ino = fid.ino;
		in.dev = fid.dev;
		if (targ_slow_ns)
			position_of(nr, ctx, f, &in);
	}
	in.ts = bpf_ktime_get_ns();
	if (bpf_map_update_elem(&inflight, &tid, &in, BPF_ANY))
		c->inflight_full++;
	return 0;
}

SEC("tracepoint/raw_syscalls/sys_exit")
int fio_exit(struct trace_event_raw_sys_exit *ctx)
{
	struct fio_counters *c;
	struct inflight in;
	struct fio_file fid = {};
	struct file *f;
	long ret = ctx->ret;
	__u64 now;

	c = take_inflight(&in, &now);
	if (!c)
		return 0;
	if (in.how == BY_RET || in.how == BY_STATBUF) {
		if (ret < 0) {
			if (in.how == BY_RET)
				c->open_errors++;
			count_errno(0, 0, in.op, ret, c);
			return 0;
		}
		if (in.how == BY_RET) {
			f = loupe_task_file(ret);
			if (!f || !identify(f, &fid, c))
				return 0;
			record_path(f, &fid, true, c); /* the name it is opened by now (renames) */
		} else {
			if (!identify_statbuf(&in, &fid, c))
				return 0;
			record_given_path(&fid, in.name, c);
		}
		in.ino = fid.ino;
		in.dev = fid.dev;
	}
	account(&in, ret, now - in.ts, c);
	if (targ_slow_ns && now - in.ts >= targ_slow_ns)
		emit_slow(ctx, &in, ret, now - in.ts, c);
	return 0;
}

/*
 * hooks = "vfs": the VFS functions themselves (fentry/fexit, else kprobe/kretprobe), for
 * reads, writes and fsyncs only. No program runs for other syscalls, and kernel callers
 * of these functions are seen too; vector I/O, opens, stats and closes are not.
 */
static __always_inline int vfs_enter(struct file *f, __u32 op, const loff_t *pos, __u64 count)
{
	__u64 id = bpf_get_current_pid_tgid();
	__u32 tid = (__u32)id;
	struct fio_counters *c;
	struct inflight in = {};
	struct fio_file fid = {};

	if (!loupe_filter_pass(id))
		return 0;
	c = get_counters();
	if (!c)
		return 0;
	c->calls++;
	if (!f || !identify(f, &fid, c))
		return 0;
	record_path(f, &fid, false, c);
	in.op = op;
	in.how = BY_FD;
	in.ino = fid.ino;
	in.dev = fid.dev;
	in.offset = NO_OFFSET;
	in.requested = count;
	if (pos)
		bpf_probe_read_kernel(&in.offset, sizeof(in.offset), pos);
	in.ts = bpf_ktime_get_ns();
	if (bpf_map_update_elem(&inflight, &tid, &in, BPF_ANY))
		c->inflight_full++;
	return 0;
}

static __always_inline int vfs_exit(void *ctx, long ret)
{
	struct fio_counters *c;
	struct inflight in;
	__u64 now;

	c = take_inflight(&in, &now);
	if (!c)
		return 0;
	if (in.op == FIO_OP_FSYNC)
		ret = (int)ret; /* an int return: a kretprobe's rax has garbage above eax */
	account(&in, ret, now - in.ts, c);
	if (targ_slow_ns && now - in.ts >= targ_slow_ns)
		emit_slow(ctx, &in, ret, now - in.ts, c);
	return 0;
}

SEC("fentry/vfs_read")
int BPF_PROG(fio_fentry_read, struct file *f, char *buf, size_t count, loff_t *pos)
{
	return vfs_enter(f, FIO_OP_READ, pos, count);
}

SEC("fexit/vfs_read")
int BPF_PROG(fio_fexit_read, struct file *f, char *buf, size_t count, loff_t *pos, ssize_t ret)
{
	return vfs_exit(ctx, ret);
}

SEC("fentry/vfs_write")
int BPF_PROG(fio_fentry_write, struct file *f, const char *buf, size_t count, loff_t *pos)
{
	return vfs_enter(f, FIO_OP_WRITE, pos, count);
}

SEC("fexit/vfs_write")
int BPF_PROG(fio_fexit_write, struct file *f, const char *buf, size_t count, loff_t *pos,
	     ssize_t ret)
{
	return vfs_exit(ctx, ret);
}

SEC("fentry/vfs_fsync_range")
int BPF_PROG(fio_fentry_fsync, struct file *f, loff_t start, loff_t end, int datasync)
{
	return vfs_enter(f, FIO_OP_FSYNC, NULL, 0);
}

SEC("fexit/vfs_fsync_range")
int BPF_PROG(fio_fexit_fsync, struct file *f, loff_t start, loff_t end, int datasync, int ret)
{
	return vfs_exit(ctx, ret);
}

SEC("kprobe/vfs_read")
int BPF_KPROBE(fio_kprobe_read, struct file *f, char *buf, size_t count, loff_t *pos)
{
	return vfs_enter(f, FIO_OP_READ, pos, count);
}

SEC("kprobe/vfs_write")
int BPF_KPROBE(fio_kprobe_write, struct file *f, const char *buf, size_t count, loff_t *pos)
{
	return vfs_enter(f, FIO_OP_WRITE, pos, count);
}

SEC("kprobe/vfs_fsync_range")
int BPF_KPROBE(fio_kprobe_fsync, struct file *f)
{
	return vfs_enter(f, FIO_OP_FSYNC, NULL, 0);
}

/* One return program for the three: the entry left the operation in `inflight`. */
SEC("kretprobe/vfs_read")
int BPF_KRETPROBE(fio_kretprobe, long ret)
{
	return vfs_exit(ctx, ret);
}

char LICENSE[] SEC("license") = "Dual BSD/GPL";
