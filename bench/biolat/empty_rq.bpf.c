// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/* Do-nothing programs on the hooks biolat uses: the baseline of its added cost. */
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>

SEC("tp_btf/block_rq_insert")
int empty_insert(void *ctx)
{
	return 0;
}

SEC("tp_btf/block_rq_issue")
int empty_issue(void *ctx)
{
	return 0;
}

SEC("tp_btf/block_rq_complete")
int empty_complete(void *ctx)
{
	return 0;
}

char LICENSE[] SEC("license") = "Dual BSD/GPL";
