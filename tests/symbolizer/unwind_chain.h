// SPDX-License-Identifier: Apache-2.0
#ifndef LOUPE_TESTS_UNWIND_CHAIN_H
#define LOUPE_TESTS_UNWIND_CHAIN_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

struct unwind_capture {
  uint64_t regs[17];  // x86-64 DWARF numbering
  uint32_t len;       // bytes of `stack`, copied from regs[7] up
  uint8_t stack[256 * 1024];
};

void unwind_chain_capture(struct unwind_capture* c);
int unwind_chain_level1(struct unwind_capture* c, int x);
int unwind_chain_level2(struct unwind_capture* c, int x);
int unwind_chain_level3(struct unwind_capture* c, int x);

#ifdef __cplusplus
}
#endif

#endif  // LOUPE_TESTS_UNWIND_CHAIN_H
