// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/* The floor lockwait is compared with: programs that do nothing on the same hooks. */
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>

SEC("tracepoint/syscalls/sys_enter_futex")
int empty_enter(void *ctx)
{
	return 0;
}

SEC("tracepoint/syscalls/sys_exit_futex")
int empty_exit(void *ctx)
{
	return 0;
}

char LICENSE[] SEC("license") = "Dual BSD/GPL";
