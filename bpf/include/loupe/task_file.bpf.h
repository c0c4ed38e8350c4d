/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * The current task's open file behind an fd, read through CO-RE from its fd table: for
 * programs on syscall hooks that get an fd and need the object (an inode, a socket).
 * Lock-free like the kernel's own fd lookup under RCU: the table may be resized meanwhile,
 * so max_fds and the array are read from one fdtable pointer.
 */
#ifndef LOUPE_TASK_FILE_BPF_H
#define LOUPE_TASK_FILE_BPF_H

#include <bpf/bpf_core_read.h>
#include <bpf/bpf_helpers.h>

/* The file `fd` of the current task, or NULL. */
static __always_inline struct file *loupe_task_file(long fd)
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

#endif /* LOUPE_TASK_FILE_BPF_H */
