// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/* The lint's test: every helper result here is used, so nothing may be reported
 * (lint_bpf_test.py). Never built. bpf_map_update_elem(m, k, v, 0); in a comment is not
 * a call, nor is "bpf_map_update_elem(m, k, v, 0);" in a string. */
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>

#define TRY_NOTE(m, k, v) bpf_map_update_elem(m, k, v, BPF_ANY)

static const char doc[] = "bpf_map_update_elem(m, k, v, 0);";

static __always_inline long f(void *ctx, void *m, void *ring, __u32 *k, __u64 *v, __u64 *lost)
{
	long err, id;

	if (bpf_map_update_elem(m, k, v, BPF_NOEXIST) == -7)
		*lost += 1;
	if (bpf_map_push_elem(m, v, 0))
		*lost += 1;
	err = bpf_ringbuf_output(ring, v, 8, 0);
	id = (long)bpf_get_stackid(ctx, m, 0);
	if (!bpf_perf_event_output(ctx, m, 0, v, 8) && err == 0 && id >= 0)
		*lost += TRY_NOTE(m, k, v) ? 1 : 0;
	*lost += err ? 1 : bpf_map_update_elem(m, k, v, BPF_ANY) != 0;
	if (bpf_map_update_elem(m, k, v, BPF_NOEXIST) && !bpf_map_lookup_elem(m, k))
		*lost += 1;
	return bpf_map_update_elem(m, k, v, BPF_ANY);
}
