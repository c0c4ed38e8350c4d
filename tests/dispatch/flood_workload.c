// SPDX-License-Identifier: Apache-2.0
// Calls getppid() N times (0 = until killed) to drive the flood test program.
#include <stdlib.h>
#include <sys/syscall.h>
#include <unistd.h>

int main(int argc, char** argv) {
  long n = argc > 1 ? atol(argv[1]) : 0;

  for (long i = 0; n == 0 || i < n; i++)
    syscall(SYS_getppid); /* the libc wrapper may be cached: force the syscall */
  return 0;
}
