/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * In-kernel histograms. Bucket layouts match loupe_bucket_scheme so user space can turn
 * the slots into loupe_bucket arrays without knowing which plugin produced them
 * (loupe/hist.h has the shared struct and the slot -> bounds functions).
 */
#ifndef LOUPE_HIST_BPF_H
#define LOUPE_HIST_BPF_H

#include "loupe/hist.h"

static __always_inline __u32 loupe_log2_u64(__u64 v)
{
	__u32 r = 0, shift;

	shift = (v > 0xFFFFFFFFULL) << 5;
	v >>= shift;
	r |= shift;
	shift = (v > 0xFFFF) << 4;
	v >>= shift;
	r |= shift;
	shift = (v > 0xFF) << 3;
	v >>= shift;
	r |= shift;
	shift = (v > 0xF) << 2;
	v >>= shift;
	r |= shift;
	shift = (v > 0x3) << 1;
	v >>= shift;
	r |= shift;
	r |= (v >> 1);
	return r;
}

/* LOUPE_BUCKETS_LOG2: slot 0 holds 0, slot i >= 1 holds (2^(i-2), 2^(i-1)], i.e.
 * ceil(log2(v)) + 1: Prometheus' schema-0 bucket index i - 1, so slots need no re-binning
 * on the way out (loupe/sdk/hist_slots.hpp has the inverse). */
static __always_inline __u32 loupe_log2_slot(__u64 v)
{
	__u32 s = v > 1 ? loupe_log2_u64(v - 1) + 2 : (__u32)v;

	return s < LOUPE_HIST_LOG2_SLOTS ? s : LOUPE_HIST_LOG2_SLOTS - 1;
}

/* LOUPE_BUCKETS_LOG2_LINEAR with LOUPE_HIST_SUB sub-buckets per power of two, upper bounds
 * inclusive like the log2 slots: 0 and each value up to LOUPE_HIST_SUB get a slot of their
 * own; above, v - 1 lands at (exp - SUB_BITS + 1) * SUB + mantissa, one slot further on. */
static __always_inline __u32 loupe_linear_slot(__u64 v)
{
	__u64 u;
	__u32 e, s;

	if (v <= LOUPE_HIST_SUB)
		return (__u32)v;
	u = v - 1;
	e = loupe_log2_u64(u);
	s = (e - LOUPE_HIST_SUB_BITS + 1) * LOUPE_HIST_SUB +
	    (__u32)((u >> (e - LOUPE_HIST_SUB_BITS)) & (LOUPE_HIST_SUB - 1)) + 1;
	return s < LOUPE_HIST_LINEAR_SLOTS ? s : LOUPE_HIST_LINEAR_SLOTS - 1;
}

/*
 * The one way BPF code here turns a computed slot into an array index: returns `slot`
 * clamped to [0, n_slots - 1], n_slots a compile-time constant.
 *
 * The compare is written in asm on the very register that then indexes. In C the compiler
 * proves the slot functions above never exceed their range (it tracks known bits through
 * the shifts and ors of loupe_log2_u64) and deletes any `slot < n` test; a verifier that
 * cannot follow variable shifts (6.1's) then sees an unbounded index and refuses the
 * program ("R0 unbounded memory access"). barrier_var() alone keeps the test but still
 * lets the compiler compare a copy or a 32-bit half. Here both paths leave the register
 * with a bound every verifier since 5.x reads: < n_slots, or the constant n_slots - 1.
 */
#define loupe_slot_bounded(slot, n_slots)                                                          \
	({                                                                                         \
		__u64 __s = (slot);                                                                \
		_Static_assert((n_slots) > 0 && (n_slots) < (1 << 20), "slot count");              \
		asm volatile("if %[s] < %[n] goto +1\n\t"                                          \
			     "%[s] = %[last]"                                                      \
			     : [s] "+r"(__s)                                                       \
			     : [n] "i"(n_slots), [last] "i"((n_slots)-1));                         \
		__s;                                                                               \
	})

/* Count `v` in `slot` of any per-CPU histogram struct with slots[n_slots], count, sum, min
 * and max (loupe_hist, or a plugin's smaller one). No atomics: the value is per CPU.
 * A slot past the end (none of the slot functions gives one) lands in the last. */
#define LOUPE_HIST_RECORD(h, v, slot, n_slots)                                                     \
	do {                                                                                       \
		(h)->slots[loupe_slot_bounded((slot), (n_slots))] += 1;                            \
		(h)->count += 1;                                                                   \
		(h)->sum += (v);                                                                   \
		if ((h)->min == 0 || (v) < (h)->min)                                               \
			(h)->min = (v);                                                            \
		if ((v) > (h)->max)                                                                \
			(h)->max = (v);                                                            \
	} while (0)

/* The same for an event that stands for `w` events (thinned: loupe/thin.bpf.h). */
#define LOUPE_HIST_RECORD_W(h, v, slot, n_slots, w)                                                \
	do {                                                                                       \
		(h)->slots[loupe_slot_bounded((slot), (n_slots))] += (w);                          \
		(h)->count += (w);                                                                 \
		(h)->sum += (v) * (w);                                                             \
		if ((h)->min == 0 || (v) < (h)->min)                                               \
			(h)->min = (v);                                                            \
		if ((v) > (h)->max)                                                                \
			(h)->max = (v);                                                            \
	} while (0)

/* Record `v` into a per-CPU loupe_hist. */
static __always_inline void loupe_hist_add(struct loupe_hist *h, __u64 v, bool linear)
{
	__u32 slot = linear ? loupe_linear_slot(v) : loupe_log2_slot(v);

	LOUPE_HIST_RECORD(h, v, slot, LOUPE_HIST_LINEAR_SLOTS);
}

#endif /* LOUPE_HIST_BPF_H */
