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

#include "loupe/filter.bpf.h"
#include "loupe/hist.bpf.h"
#include "fileio.h"

const volatile bool targ_regular_only = true;

struct inflight {
	__u64 ts;
	__u64 ino;
	__u32 dev;
	__u32 op;
};

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 10240);
	__type(key, __u32); /* tid */
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

/* x86_64 syscall numbers. */
static __always_inline __u32 op_of(long nr, bool *fd_arg)
{
	*fd_arg = true;
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
	case 3: /* close */
		return FIO_OP_CLOSE;
	case 2:			 /* open */
	case 85:		 /* creat */
	case 257:		 /* openat */
	case 437:		 /* openat2 */
		*fd_arg = false; /* the file is the returned fd */
		return FIO_OP_OPEN;
	}
	return 0;
}

/* The current task's open file `fd`, or NULL. */
static __always_inline struct file *file_of(long fd)
{
	struct task_struct *task = (void *)bpf_get_current_task();
	struct fdtable *fdt = BPF_CORE_READ(task, files, fdt);
	struct file **fds;
	struct file *f = NULL;

	if (fd < 0 || !fdt || (__u64)fd >= BPF_CORE_READ(fdt, max_fds))
		return NULL;
	fds = BPF_CORE_READ(fdt, fd);
	bpf_probe_read_kernel(&f, sizeof(f), &fds[fd]);
	return f;
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

static __always_inline void account(const struct inflight *in, long ret, __u64 delta,
				    struct fio_counters *c)
{
	struct fio_key k = {.ino = in->ino, .dev = in->dev, .op = in->op};
	struct fio_stats *s;
	__u32 zero = 0;

	s = bpf_map_lookup_elem(&stats, &k);
	if (!s) {
		struct fio_stats *z = bpf_map_lookup_elem(&zero_stats, &zero);

		if (z)
			bpf_map_update_elem(&stats, &k, z, BPF_NOEXIST);
		s = bpf_map_lookup_elem(&stats, &k);
		if (!s) {
			c->stats_full++;
			return;
		}
	}
	__sync_fetch_and_add(&s->count, 1);
	__sync_fetch_and_add(&s->total_ns, delta);
	if (ret < 0)
		__sync_fetch_and_add(&s->errors, 1);
	else if (in->op == FIO_OP_READ || in->op == FIO_OP_WRITE)
		__sync_fetch_and_add(&s->bytes, (__u64)ret);
	__sync_fetch_and_add(&s->slots[loupe_slot_bounded(loupe_log2_slot(delta), FIO_HIST_SLOTS)],
			     1);
	if (delta > s->max_ns)
		s->max_ns = delta;
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
	bool fd_arg;
	long fd;

	in.op = op_of(ctx->id, &fd_arg);
	if (!in.op || !loupe_filter_pass(id))
		return 0;
	c = get_counters();
	if (!c)
		return 0;
	c->calls++;
	if (fd_arg) {
		/* The file now: after close the fd names nothing. */
		fd = (long)ctx->args[0];
		f = file_of(fd);
		if (!f) {
			c->no_file++;
			return 0;
		}
		if (!identify(f, &fid, c))
			return 0;
		record_path(f, &fid, false, c);
		in.ino = fid.ino;
		in.dev = fid.dev;
	}
	in.ts = bpf_ktime_get_ns();
	if (bpf_map_update_elem(&inflight, &tid, &in, BPF_ANY))
		c->inflight_full++;
	return 0;
}

SEC("tracepoint/raw_syscalls/sys_exit")
int fio_exit(struct trace_event_raw_sys_exit *ctx)
{
	__u32 tid = (__u32)bpf_get_current_pid_tgid();
	struct inflight *p = bpf_map_lookup_elem(&inflight, &tid);
	struct fio_counters *c;
	struct inflight in;
	struct fio_file fid = {};
	struct file *f;
	long ret = ctx->ret;
	__u64 now;

	if (!p)
		return 0;
	now = bpf_ktime_get_ns();
	in = *p;
	bpf_map_delete_elem(&inflight, &tid);
	c = get_counters();
	if (!c || now < in.ts)
		return 0;
	if (in.op == FIO_OP_OPEN) {
		if (ret < 0) {
			c->open_errors++;
			return 0;
		}
		f = file_of(ret);
		if (!f || !identify(f, &fid, c))
			return 0;
		record_path(f, &fid, true, c); /* the name it is opened by now (renames) */
		in.ino = fid.ino;
		in.dev = fid.dev;
	}
	account(&in, ret, now - in.ts, c);
	return 0;
}

char LICENSE[] SEC("license") = "Dual BSD/GPL";
