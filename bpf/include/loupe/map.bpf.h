/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * Bounded hash maps that say when they are full.
 *
 * Every insert into a bounded map can fail (-E2BIG when it holds max_entries, -ENOMEM
 * without preallocation), and a failed insert is data lost: the caller counts it in a
 * named counter that its reporter turns into a WARN health record naming the config key
 * that raises the bound (scripts/lint-bpf.py refuses an insert whose result is ignored).
 */
#ifndef LOUPE_MAP_BPF_H
#define LOUPE_MAP_BPF_H

#include <bpf/bpf_helpers.h>

#define LOUPE_EEXIST 17

/*
 * The value of `key` in the hash `map`, inserted as a copy of `init` when absent; NULL
 * when the map is full (the caller counts it). A racing CPU's insert of the same key
 * (-EEXIST) is not a loss: the lookup then finds its entry. One lookup when the key is
 * there, which is the common case of an aggregation map.
 */
static __always_inline void *loupe_lookup_or_init(void *map, const void *key, const void *init)
{
	void *v = bpf_map_lookup_elem(map, key);
	long err;

	if (v)
		return v;
	err = bpf_map_update_elem(map, key, init, BPF_NOEXIST);
	if (err && err != -LOUPE_EEXIST)
		return NULL;
	return bpf_map_lookup_elem(map, key);
}

/*
 * Stable small numbers for keys first seen in BPF: a hot path that finds a key's slot once
 * (and keeps it where it keeps the event's other state) then reaches the key's row in an
 * array, an inlined load, instead of hashing the key again in a hash of rows. Slots are
 * never given back while the maps live, so a slot names one key for the session.
 *
 * The claim is a BPF_NOEXIST insert into `taken` (a hash keyed by __u32 slot, max_entries
 * >= limit), which two CPUs cannot both win; `hint` (a global) is where the next free slot
 * probably is, read and written without atomics (a stale hint costs a retry, not a
 * duplicate). LOUPE_SLOT_NONE when `limit` slots are taken (the caller counts it).
 */
#define LOUPE_SLOT_NONE 0xffffffffU
#define LOUPE_SLOT_TRIES 8

static __always_inline __u32 loupe_slot_claim(void *taken, __u32 *hint, __u32 limit)
{
	__u32 slot = *hint;
	__u8 one = 1;
	int i;

	for (i = 0; i < LOUPE_SLOT_TRIES; i++, slot++) {
		if (slot >= limit)
			return LOUPE_SLOT_NONE;
		if (!bpf_map_update_elem(taken, &slot, &one, BPF_NOEXIST)) {
			*hint = slot + 1;
			return slot;
		}
	}
	return LOUPE_SLOT_NONE;
}

/*
 * The value of `key` in the hash `slots`, inserted when the key is new: `init` is the
 * value to insert and `init_slot` the field of it that gets a claimed slot. NULL when no
 * slot is left or `slots` is full. A CPU that loses the race to name the same key gives
 * its claim back and gets the winner's value.
 */
static __always_inline void *loupe_slot_entry(void *slots, void *taken, __u32 *hint, __u32 limit,
					      const void *key, void *init, __u32 *init_slot)
{
	void *found = bpf_map_lookup_elem(slots, key);

	if (found)
		return found;
	*init_slot = loupe_slot_claim(taken, hint, limit);
	if (*init_slot == LOUPE_SLOT_NONE)
		return NULL;
	if (bpf_map_update_elem(slots, key, init, BPF_NOEXIST))
		bpf_map_delete_elem(taken, init_slot);
	return bpf_map_lookup_elem(slots, key);
}

/* The slot of `key` in the hash `slots` (key -> __u32): loupe_slot_entry's value is the
 * slot alone. LOUPE_SLOT_NONE when no slot is left or `slots` is full. */
static __always_inline __u32 loupe_slot_of(void *slots, void *taken, __u32 *hint, __u32 limit,
					   const void *key)
{
	__u32 init = LOUPE_SLOT_NONE;
	__u32 *slot = loupe_slot_entry(slots, taken, hint, limit, key, &init, &init);

	return slot ? *slot : LOUPE_SLOT_NONE;
}

#endif /* LOUPE_MAP_BPF_H */
