// SPDX-License-Identifier: Apache-2.0
//
// A process with known symbols for the symbolizer tests: prints the runtime address of
// each, then waits to be killed. Built as PIE, non-PIE, stripped and with a shared library.
#include <stdio.h>
#include <sys/mman.h>
#include <unistd.h>

#ifdef LOUPE_WITH_LIB
void loupe_lib_report(void);
#endif

int loupe_known_global = 42;
long loupe_known_bss[512];

__attribute__((noinline)) int loupe_known_function(int x) {  // line: known_function
  __asm__ volatile("" ::: "memory");
  return x * 7 + loupe_known_global;
}

__attribute__((noinline)) static int loupe_static_function(int x) {
  __asm__ volatile("" ::: "memory");
  return x * 5 + (int)loupe_known_bss[3];
}

static inline __attribute__((always_inline)) int loupe_inlined_helper(int x) {
  int y = x * x;
  __asm__ volatile("" : "+r"(y));  // line: inlined_body
  return y + 1;
}

__attribute__((noinline)) int loupe_inline_caller(int x) {
  return loupe_inlined_helper(x) * 2;  // line: call_site
}

int main(void) {
  // Stands in for a JIT's code region: anonymous memory no ELF file describes.
  void* jit = mmap(NULL, 65536, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  int (*volatile keep)(int) = loupe_static_function;
  loupe_known_bss[3] = keep(1) + loupe_known_function(2) + loupe_inline_caller(3);
  printf("loupe_known_function %p\n", (void*)loupe_known_function);
  printf("loupe_static_function %p\n", (void*)keep);
  printf("loupe_known_global %p\n", (void*)&loupe_known_global);
  printf("loupe_known_bss %p\n", (void*)loupe_known_bss);
  printf("loupe_inline_caller %p\n", (void*)loupe_inline_caller);
  printf("jit_region %p\n", jit);
#ifdef LOUPE_WITH_LIB
  loupe_lib_report();
#endif
  printf("pid %#x\n", (unsigned)getpid());  // hex, as every other value
  printf("ready\n");
  fflush(stdout);
  for (;;) pause();
}
