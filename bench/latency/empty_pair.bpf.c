// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/* The floor the latency pair is compared with: programs that do nothing, attached to the
 * same entry/exit hooks in the same run. */
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>

SEC("uprobe")
int empty_uprobe_entry(void *ctx)
{
	return 0;
}

SEC("uretprobe")
int empty_uprobe_exit(void *ctx)
{
	return 0;
}

SEC("tracepoint")
int empty_tp_entry(void *ctx)
{
	return 0;
}

SEC("tracepoint")
int empty_tp_exit(void *ctx)
{
	return 0;
}

char LICENSE[] SEC("license") = "Dual BSD/GPL";
