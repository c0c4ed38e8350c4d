/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * Thinning under a budget (plugin ABI 1.9, loupe_rate_args): the host asks a profiler to
 * keep 1 in N of its events, and every kept event then counts as N, so what the plugin
 * aggregates stays an estimate of the whole rather than a fraction of it.
 *
 * A plugin that includes this header declares the `loupe_thin` map; user space writes the
 * divisor into it (loupe::sdk::Thinning, loupe/sdk/thinning.hpp). The choice is random per
 * event (bpf_get_prandom_u32), not every N-th: periodic work cannot fall into lockstep
 * with it, and each event's probability of being kept is exactly 1/N, which is what makes
 * weighing it by N unbiased.
 *
 * The decision belongs before the costly part of the program (stack walks, hash updates):
 * what thinning saves is that part, the early exit still runs.
 */
#ifndef LOUPE_THIN_BPF_H
#define LOUPE_THIN_BPF_H

#include <bpf/bpf_helpers.h>

/* Key 0: the divisor; 0 and 1 both mean every event (an unwritten map keeps everything). */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, __u32);
} loupe_thin SEC(".maps");

/* The weight of this event: 0 when thinning skips it, else the divisor in force (1 when
 * none), which the caller adds in place of 1 (and multiplies measured time by). */
static __always_inline __u32 loupe_thin_weight(void)
{
	__u32 zero = 0;
	__u32 *div = bpf_map_lookup_elem(&loupe_thin, &zero);
	__u32 n = div ? *div : 1;

	if (n <= 1)
		return 1;
	return bpf_get_prandom_u32() % n == 0 ? n : 0;
}

#endif /* LOUPE_THIN_BPF_H */
