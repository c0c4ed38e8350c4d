// SPDX-License-Identifier: Apache-2.0
/*
 * A process whose syscall profile is known exactly: N getppid() and M getcwd() calls,
 * then exit. Both go through syscall(2) so no libc caching or wrapper can add or hide one;
 * neither is made by the dynamic loader or libc start-up, so the counts a profiler reports
 * for this pid must be exactly N and M (and 5 of syscall 462 on x86_64).
 *
 * Usage: syscount_workload N M
 */
#define _GNU_SOURCE
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/syscall.h>
#include <unistd.h>

static int parse_count(const char* s, unsigned long* out) {
  char* end;

  errno = 0;
  *out = strtoul(s, &end, 10);
  return errno == 0 && end != s && *end == '\0' && s[0] != '-';
}

int main(int argc, char** argv) {
  unsigned long n, m, i;
  char buf[PATH_MAX];

  if (argc != 3 || !parse_count(argv[1], &n) || !parse_count(argv[2], &m)) {
    fprintf(stderr, "usage: %s N M (N getppid and M getcwd syscalls)\n", argv[0]);
    return 2;
  }
  for (i = 0; i < n; i++) syscall(SYS_getppid);
  for (i = 0; i < m; i++) syscall(SYS_getcwd, buf, sizeof(buf));
#if defined(__x86_64__)
  /* 5 x syscall 462 (mseal, newer than Debian 12's headers): entered on every kernel
   * (ENOSYS before 6.10; a no-op for length 0 after), so its name must not depend on the
   * build machine's headers. */
  for (i = 0; i < 5; i++) syscall(462, 0UL, 0UL, 0UL);
#endif
  return 0;
}
