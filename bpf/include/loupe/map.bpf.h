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

#endif /* LOUPE_MAP_BPF_H */
