/* SPDX-License-Identifier: Apache-2.0 */
/* The flood test plugin's ring record, shared by flood.bpf.c and flood_plugin.cpp. */
#ifndef LOUPE_TEST_FLOOD_H
#define LOUPE_TEST_FLOOD_H

#define FLOOD_RECORD_TYPE 0x7a01
#define FLOOD_RECORD_VERSION 1
#define FLOOD_MAX_BURST 256
#define FLOOD_KEYS 8

/* Counters in the flood_counts per-CPU array. */
#define FLOOD_ATTEMPTS 0    /* records the program tried to emit: "produced" */
#define FLOOD_SAMPLED_OUT 1 /* skipped because the core raised the divisor */

struct flood_record {
  __u16 type; /* loupe_ring_header */
  __u16 version;
  __u32 len;
  __u64 seq;
  __u32 tgid;
  __u32 key;
};

#endif
