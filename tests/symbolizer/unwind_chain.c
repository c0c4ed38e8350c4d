// SPDX-License-Identifier: Apache-2.0
//
// A call chain built without frame pointers whose leaf captures its own registers and a
// copy of the stack above sp, as ustack.bpf.h does for a sampled thread: the unwinder
// test replays the copy through the symbolizer's DWARF unwinder.
#include "unwind_chain.h"

#include <stdio.h>
#include <string.h>

// The end of the mapping holding `sp` (the stack's top): the copy must not run past it.
static uint64_t stack_top(uint64_t sp) {
  FILE* f = fopen("/proc/self/maps", "r");
  char line[512];
  uint64_t top = 0;
  while (f && fgets(line, sizeof(line), f)) {
    unsigned long long lo = 0, hi = 0;
    if (sscanf(line, "%llx-%llx", &lo, &hi) == 2 && sp >= lo && sp < hi) {
      top = hi;
      break;
    }
  }
  if (f) fclose(f);
  return top;
}

__attribute__((noinline)) void unwind_chain_capture(struct unwind_capture* c) {
  uint64_t here = 0;
  const uint64_t top = stack_top((uint64_t)&here);
  uint64_t* r = c->regs;
  // DWARF order: rax rdx rcx rbx rsi rdi rbp rsp r8-r15, then rip (a label in this code).
  __asm__ volatile(
      "movq %%rax, 0(%0)\n\t"
      "movq %%rdx, 8(%0)\n\t"
      "movq %%rcx, 16(%0)\n\t"
      "movq %%rbx, 24(%0)\n\t"
      "movq %%rsi, 32(%0)\n\t"
      "movq %%rdi, 40(%0)\n\t"
      "movq %%rbp, 48(%0)\n\t"
      "movq %%rsp, 56(%0)\n\t"
      "movq %%r8, 64(%0)\n\t"
      "movq %%r9, 72(%0)\n\t"
      "movq %%r10, 80(%0)\n\t"
      "movq %%r11, 88(%0)\n\t"
      "movq %%r12, 96(%0)\n\t"
      "movq %%r13, 104(%0)\n\t"
      "movq %%r14, 112(%0)\n\t"
      "movq %%r15, 120(%0)\n\t"
      "leaq 0(%%rip), %%rax\n\t"
      "movq %%rax, 128(%0)\n\t"
      :
      : "r"(r)
      : "rax", "memory");
  uint64_t sp = c->regs[7];
  uint64_t len = top > sp ? top - sp : 0;
  if (len > sizeof(c->stack)) len = sizeof(c->stack);
  memcpy(c->stack, (const void*)sp, len);
  c->len = (uint32_t)len;
}

// Each level does work after its call, so none is a tail call that would leave no frame.
__attribute__((noinline)) int unwind_chain_level1(struct unwind_capture* c, int x) {
  unwind_chain_capture(c);
  __asm__ volatile("" ::: "memory");
  return x * 3 + (int)(c->len % 7);
}

__attribute__((noinline)) int unwind_chain_level2(struct unwind_capture* c, int x) {
  int v = unwind_chain_level1(c, x + 1);
  __asm__ volatile("" ::: "memory");
  return v + (int)(c->regs[7] & 1);
}

__attribute__((noinline)) int unwind_chain_level3(struct unwind_capture* c, int x) {
  char pad[300];  // a frame of its own size, so the CFA rules differ per level
  memset(pad, x, sizeof(pad));
  __asm__ volatile("" : : "r"(pad) : "memory");
  int v = unwind_chain_level2(c, x * 2);
  __asm__ volatile("" ::: "memory");
  return v + pad[x % 300];
}
