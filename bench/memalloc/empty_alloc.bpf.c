// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/* The floor memalloc is compared with: programs that do nothing, attached to the same
 * allocator hooks (malloc entry and return, free entry) in the same run. */
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>

SEC("uprobe")
int empty_entry(void *ctx)
{
	return 0;
}

SEC("uretprobe")
int empty_return(void *ctx)
{
	return 0;
}

char LICENSE[] SEC("license") = "Dual BSD/GPL";
