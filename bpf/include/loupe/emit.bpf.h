/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * Ring-buffer emission with loss accounting and a watermark wake-up policy.
 *
 * A wake-up per record costs ~1.5-1.9 us on our VMs, ~180 ns without: so records are
 * submitted with BPF_RB_NO_WAKEUP until the unconsumed data passes a watermark, and the
 * core's reader drains on its own schedule (bounded delivery delay). Setting the rodata
 * loupe_wakeup_bytes to 0 restores a wake-up per record.
 *
 * Every failed reserve is counted in the ring's per-CPU `_lost` map, which the core reads
 * (loupe_ring_spec.lost_map_fd), so kernel-side loss is never silent.
 */
#ifndef LOUPE_EMIT_BPF_H
#define LOUPE_EMIT_BPF_H

#include <bpf/bpf_helpers.h>

/* Layout identical to loupe_ring_header in sdk/include/loupe/abi/host.h. */
struct loupe_rec_hdr {
	__u16 type;
	__u16 version;
	__u32 len;
};

const volatile __u64 loupe_wakeup_bytes = 64 * 1024;

/* Declares <name> (ring), <name>_lost (per-CPU reserve failures) and <name>_divisor
 * (sampling divisor the core raises under pressure; 0 or 1 = emit everything). */
#define LOUPE_RING(name, bytes)                                                                    \
	struct {                                                                                   \
		__uint(type, BPF_MAP_TYPE_RINGBUF);                                                \
		__uint(max_entries, bytes);                                                        \
	} name SEC(".maps");                                                                       \
	struct {                                                                                   \
		__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);                                           \
		__uint(max_entries, 1);                                                            \
		__type(key, __u32);                                                                \
		__type(value, __u64);                                                              \
	} name##_lost SEC(".maps");                                                                \
	struct {                                                                                   \
		__uint(type, BPF_MAP_TYPE_ARRAY);                                                  \
		__uint(max_entries, 1);                                                            \
		__type(key, __u32);                                                                \
		__type(value, __u32);                                                              \
	} name##_divisor SEC(".maps")

static __always_inline void loupe_count_lost(void *lost_map)
{
	__u32 zero = 0;
	__u64 *lost = bpf_map_lookup_elem(lost_map, &zero);

	if (lost)
		*lost += 1; /* per-CPU slot: no atomic needed */
}

/* True when the core asked for 1-in-N sampling and this record is not the one. Cheap:
 * one array lookup and, only under pressure, a prandom call. */
static __always_inline bool loupe_sampled_out(void *divisor_map)
{
	__u32 zero = 0;
	__u32 *div = bpf_map_lookup_elem(divisor_map, &zero);

	if (!div || *div <= 1)
		return false;
	return bpf_get_prandom_u32() % *div != 0;
}

/* Reserve `size` bytes and fill the header; NULL (and counted) when the ring is full. */
static __always_inline void *loupe_reserve(void *ring, void *lost_map, __u32 size, __u16 type,
					   __u16 version)
{
	struct loupe_rec_hdr *hdr = bpf_ringbuf_reserve(ring, size, 0);

	if (!hdr) {
		loupe_count_lost(lost_map);
		return NULL;
	}
	hdr->type = type;
	hdr->version = version;
	hdr->len = size;
	return hdr;
}

/* Wakes the consumer once the unconsumed data passes the watermark. A ring smaller than
 * twice the watermark must lower loupe_wakeup_bytes (rodata, before load) to at most half
 * its size, else it would never wake the consumer and would overflow between two timed
 * drains. (One query per record: asking for the ring size too would add a helper call.) */
static __always_inline void loupe_submit(void *ring, void *rec)
{
	__u64 flags = BPF_RB_NO_WAKEUP;

	if (loupe_wakeup_bytes == 0 ||
	    bpf_ringbuf_query(ring, BPF_RB_AVAIL_DATA) >= loupe_wakeup_bytes)
		flags = BPF_RB_FORCE_WAKEUP;
	bpf_ringbuf_submit(rec, flags);
}

/* For variable-length records built elsewhere (a per-CPU scratch value): copies `size`
 * bytes into the ring with the same wake-up policy; a full ring is counted as lost. The
 * record's header must already carry `size` as its len. */
static __always_inline long loupe_output(void *ring, void *lost_map, void *data, __u64 size)
{
	__u64 flags = BPF_RB_NO_WAKEUP;
	long err;

	if (loupe_wakeup_bytes == 0 ||
	    bpf_ringbuf_query(ring, BPF_RB_AVAIL_DATA) + size >= loupe_wakeup_bytes)
		flags = BPF_RB_FORCE_WAKEUP;
	err = bpf_ringbuf_output(ring, data, size, flags);
	if (err)
		loupe_count_lost(lost_map);
	return err;
}

#define LOUPE_RESERVE(name, type_t, rec_type, rec_version)                                         \
	((type_t *)loupe_reserve(&name, &name##_lost, sizeof(type_t), rec_type, rec_version))
#define LOUPE_SUBMIT(name, rec) loupe_submit(&name, rec)

#endif /* LOUPE_EMIT_BPF_H */
