/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * Keys handed over at a process's exit. A profiler that aggregates in a hash map keyed by
 * process (cpusample's counts, offcpu's blocks) fills it with the keys of processes that
 * are gone until user space evicts them at its next interval report (loupe/sdk/eviction.hpp);
 * under process churn, with user space starved or reports minutes apart, new processes'
 * keys are then refused. Here the kernel side frees the room itself, in the exiting task's
 * own context, so it cannot fall behind:
 *
 *   - each new key is also written to its process's list (LOUPE_HANDOVER_KEYS at most; the
 *     keys past that stay for user space's eviction, as before: a process that blocks or
 *     is sampled under more distinct stacks than that is long-lived, not churn);
 *   - at the process's exit (its last thread's sched_process_exit) every listed key still in
 *     the map is copied with its value into a ring record and deleted from the map.
 *
 * User space adds a handed-over key to its report as if it had read it from the map (the
 * value is the key's total, as a map read gives it). A record the ring had no room for
 * leaves its key, and the rest of the list's, in the map: counted, nothing lost.
 *
 * Declared per profiler: LOUPE_HANDOVER(name, key type, value type, record type) makes
 * the list map `name_lists`, its zeroed template `name_empty`, the ring `name_ring` (with
 * its `_lost` and `_divisor` maps, emit.bpf.h) and the functions `name_track(tgid, key)`
 * (after the key was inserted) and `name_exit(map, record type id, version, full)` (from
 * the exit hook). The record type is the plugin's: `struct { struct loupe_rec_hdr hdr;
 * KEY key; VALUE value; }`. User space sizes `name_lists` (processes at once) and the ring.
 */
#ifndef LOUPE_HANDOVER_BPF_H
#define LOUPE_HANDOVER_BPF_H

#include <bpf/bpf_core_read.h>
#include <bpf/bpf_helpers.h>

#include "loupe/emit.bpf.h"

#define LOUPE_HANDOVER_KEYS 32

/* The current task is its process's last thread to exit (signal->live is decremented
 * before sched_process_exit fires, in every kernel since 2.6). */
static __always_inline bool loupe_handover_group_dead(void)
{
	struct task_struct *t = (void *)bpf_get_current_task();

	return BPF_CORE_READ(t, signal, live.counter) == 0;
}

#define LOUPE_HANDOVER(name, key_t, val_t, rec_t)                                                  \
	struct name##_list {                                                                       \
		__u32 n; /* keys listed, at most LOUPE_HANDOVER_KEYS */                            \
		__u32 pad;                                                                         \
		key_t keys[LOUPE_HANDOVER_KEYS];                                                   \
	};                                                                                         \
	struct {                                                                                   \
		__uint(type, BPF_MAP_TYPE_HASH);                                                   \
		__uint(max_entries, 512); /* user space sizes it */                                \
		__type(key, __u32);	  /* tgid */                                               \
		__type(value, struct name##_list);                                                 \
	} name##_lists SEC(".maps");                                                               \
	/* Never written: a new list starts from it (too big for the BPF stack). */                \
	struct {                                                                                   \
		__uint(type, BPF_MAP_TYPE_ARRAY);                                                  \
		__uint(max_entries, 1);                                                            \
		__type(key, __u32);                                                                \
		__type(value, struct name##_list);                                                 \
	} name##_empty SEC(".maps");                                                               \
	LOUPE_RING(name##_ring, 256 * 1024);                                                       \
                                                                                                   \
	/* False when the key is not listed (no room for its process, or past the bound). */       \
	static __always_inline bool name##_track(__u32 tgid, const key_t *key)                     \
	{                                                                                          \
		struct name##_list *l = bpf_map_lookup_elem(&name##_lists, &tgid);                 \
		__u32 zero = 0, i;                                                                 \
		long err;                                                                          \
                                                                                                   \
		if (!l) {                                                                          \
			struct name##_list *e = bpf_map_lookup_elem(&name##_empty, &zero);         \
                                                                                                   \
			if (!e)                                                                    \
				return false;                                                      \
			/* EEXIST: another CPU made it meanwhile. Else no room for one more        \
			 * process: its keys are left to user space's eviction, not lost. */       \
			err = bpf_map_update_elem(&name##_lists, &tgid, e, BPF_NOEXIST);           \
			if (err && err != -17)                                                     \
				return false;                                                      \
			l = bpf_map_lookup_elem(&name##_lists, &tgid);                             \
			if (!l)                                                                    \
				return false;                                                      \
		}                                                                                  \
		/* Not atomic (a fetch-add's result needs BPF v3): two threads of one process      \
		 * adding keys at once on two CPUs may list one over the other, and that key is    \
		 * then left to user space's eviction, as one past the bound is. */                \
		i = l->n;                                                                          \
		if (i >= LOUPE_HANDOVER_KEYS)                                                      \
			return false;                                                              \
		l->n = i + 1;                                                                      \
		l->keys[i] = *key;                                                                 \
		return true;                                                                       \
	}                                                                                          \
                                                                                                   \
	/* From the exit hook: the exiting process's listed keys out of `map` into the ring.       \
	 * Returns the keys handed over; *full counts those left in the map for want of room. */   \
	static __always_inline __u32 name##_exit(void *map, __u16 rec_type, __u16 rec_version,     \
						 __u64 *full)                                      \
	{                                                                                          \
		__u32 tgid = bpf_get_current_pid_tgid() >> 32, n, i, handed = 0;                   \
		struct name##_list *l;                                                             \
                                                                                                   \
		if (!loupe_handover_group_dead())                                                  \
			return 0;                                                                  \
		l = bpf_map_lookup_elem(&name##_lists, &tgid);                                     \
		if (!l)                                                                            \
			return 0;                                                                  \
		n = l->n;                                                                          \
		for (i = 0; i < LOUPE_HANDOVER_KEYS; i++) {                                        \
			val_t *v;                                                                  \
			rec_t *r;                                                                  \
                                                                                                   \
			if (i >= n)                                                                \
				break;                                                             \
			v = bpf_map_lookup_elem(map, &l->keys[i]);                                 \
			if (!v)                                                                    \
				continue;                                                          \
			r = LOUPE_RESERVE(name##_ring, rec_t, rec_type, rec_version);              \
			if (!r) {                                                                  \
				*full += 1;                                                        \
				continue;                                                          \
			}                                                                          \
			r->key = l->keys[i];                                                       \
			r->value = *v;                                                             \
			/* Out of the map before the record can be read: a report never finds a    \
			 * key both in the map and handed over (it would count it twice). */       \
			bpf_map_delete_elem(map, &l->keys[i]);                                     \
			LOUPE_SUBMIT(name##_ring, r);                                              \
			handed++;                                                                  \
		}                                                                                  \
		bpf_map_delete_elem(&name##_lists, &tgid);                                         \
		return handed;                                                                     \
	}

#endif /* LOUPE_HANDOVER_BPF_H */
