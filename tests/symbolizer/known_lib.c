// SPDX-License-Identifier: Apache-2.0
//
// A shared library with a known function and variable; it prints their addresses itself
// so the executable never takes them (no canonical PLT entry, no copy relocation).
#include <stdio.h>

int loupe_lib_global = 7;

__attribute__((noinline)) int loupe_lib_function(int x) {
  __asm__ volatile("" ::: "memory");
  return x * 3 + loupe_lib_global;
}

void loupe_lib_report(void) {
  printf("loupe_lib_function %p\n", (void*)loupe_lib_function);
  printf("loupe_lib_global %p\n", (void*)&loupe_lib_global);
}
