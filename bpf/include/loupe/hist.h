/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * The histogram value shared by BPF programs and user space (fixed-width types only).
 * min is stored as 0 for "unset": a true 0 observation keeps min at 0, which is correct.
 */
#ifndef LOUPE_HIST_H
#define LOUPE_HIST_H

#ifndef __bpf__
#include <linux/types.h>
#endif

/*
 * Slots count the upper side of each bound, (lower, upper], as Prometheus native histograms
 * and OpenTelemetry exponential histograms (scale 0) do; slot 0 holds 0 alone. 66 log2
 * slots give every __u64 one: {0}, {1}, (1, 2], ..., (2^63, 2^64).
 */
#define LOUPE_HIST_LOG2_SLOTS 66
#define LOUPE_HIST_SUB_BITS 3 /* 8 sub-buckets per power of two: <= 12.5% relative error */
#define LOUPE_HIST_SUB (1u << LOUPE_HIST_SUB_BITS)
#define LOUPE_HIST_LINEAR_SLOTS ((64 - LOUPE_HIST_SUB_BITS + 1) * LOUPE_HIST_SUB + 1)

struct loupe_hist {
	__u64 count;
	__u64 sum;
	__u64 min;
	__u64 max;
	/* log2 uses the first LOUPE_HIST_LOG2_SLOTS entries, log2-linear all of them. */
	__u64 slots[LOUPE_HIST_LINEAR_SLOTS];
};

#endif /* LOUPE_HIST_H */
