/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
#ifndef LOUPE_TESTS_UNWIND_PROBE_H
#define LOUPE_TESTS_UNWIND_PROBE_H

#ifndef __bpf__
#include <linux/types.h>
#endif

struct up_key {
  __u32 tid;
  __s32 table_id; /* loupe_unwind_stacks; -1: none */
  __s32 fp_id;    /* fp_stacks; < 0: none */
};

#endif /* LOUPE_TESTS_UNWIND_PROBE_H */
