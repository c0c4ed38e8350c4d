// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/* The lint's test: every line marked FLAG throws a helper's result away and must be
 * reported (lint_bpf_test.py); no other line may be. Never built. */
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>

#define NOTE(m, k, v)                                                                              \
	do {                                                                                       \
		bpf_map_update_elem(m, k, v, BPF_ANY); /* FLAG */                                  \
	} while (0)

static __always_inline void f(void *ctx, void *m, void *ring, __u32 *k, __u64 *v, int x)
{
	bpf_map_update_elem(m, k, v, BPF_NOEXIST); /* FLAG */
	if (x)
		bpf_map_push_elem(m, v, 0); /* FLAG */
	else
		bpf_ringbuf_output(ring, v, 8, 0); /* FLAG */
	for (int i = 0; i < 2; i++)
		bpf_get_stackid(ctx, m, 0);	      /* FLAG */
	(void)bpf_perf_event_output(ctx, m, 0, v, 8); /* FLAG */
	switch (x) {
	case 1:
		bpf_map_update_elem(m, k, v, BPF_ANY); /* FLAG */
		break;
	}
	bpf_map_update_elem(m, k, /* FLAG: the line of the call's name is reported */
			    v, BPF_ANY);
	NOTE(m, k, v);
}
