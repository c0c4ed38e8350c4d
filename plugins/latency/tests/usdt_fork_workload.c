// SPDX-License-Identifier: Apache-2.0
/*
 * A forking server in miniature, for per-site USDT counts that must not depend on how many
 * processes fired them (a database that forks one backend per connection):
 *
 *   usdt_fork_workload N [C]
 *
 * The listener accepts N "connections" (socketpairs it makes itself), forks one backend per
 * connection, at most C (default 8) alive at once, and sends each backend its connection
 * number. Backend i runs (i % 2) + 1 transactions, each loupe:txn__start ... loupe:txn__commit
 * around (i % 5) + 1 statements: loupe:statement(i % 16) fired from run_select (even
 * statements) or run_update (odd ones): one probe name, two sites. Every backend exits
 * before the listener prints what they fired, its own count:
 *   "children N txn T select S update U"
 */
#include <stdio.h>
#include <stdlib.h>
#include <sys/sdt.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

static volatile int sink;

__attribute__((noinline)) static void run_select(int value) {
  STAP_PROBE1(loupe, statement, value);
  sink += value;
}

__attribute__((noinline)) static void run_update(int value) {
  STAP_PROBE1(loupe, statement, value);
  sink -= value;
}

__attribute__((noinline)) static void run_txn(int conn) {
  STAP_PROBE1(loupe, txn__start, conn);
  for (int q = 0; q < conn % 5 + 1; ++q) (q % 2 ? run_update : run_select)(conn % 16);
  STAP_PROBE1(loupe, txn__commit, conn);
}

static int backend(int fd) {
  int conn = 0;
  if (read(fd, &conn, sizeof(conn)) != sizeof(conn)) return 1;
  for (int t = 0; t < conn % 2 + 1; ++t) run_txn(conn);
  return 0;
}

int main(int argc, char** argv) {
  if (argc != 2 && argc != 3) {
    fprintf(stderr, "usage: %s N [C]\n", argv[0]);
    return 2;
  }
  int n = atoi(argv[1]), max_alive = argc == 3 ? atoi(argv[2]) : 8, alive = 0, failed = 0;
  long txns = 0, selects = 0, updates = 0;
  for (int i = 0; i < n; ++i) {
    if (alive == max_alive) {
      int status = 0;
      if (wait(&status) > 0) {
        --alive;
        failed += !WIFEXITED(status) || WEXITSTATUS(status) != 0;
      }
    }
    int sv[2];
    if (socketpair(AF_UNIX, SOCK_STREAM, 0, sv) != 0) {
      perror("socketpair");
      return 1;
    }
    pid_t pid = fork();
    if (pid < 0) {
      perror("fork");
      return 1;
    }
    if (pid == 0) {
      close(sv[0]);
      _exit(backend(sv[1]));
    }
    close(sv[1]);
    ++alive;
    if (write(sv[0], &i, sizeof(i)) != sizeof(i)) ++failed;
    close(sv[0]);
    // What backend i fires, counted as it runs it.
    int per_txn = i % 5 + 1, n_txn = i % 2 + 1;
    txns += n_txn;
    selects += (long)n_txn * ((per_txn + 1) / 2);
    updates += (long)n_txn * (per_txn / 2);
  }
  int status = 0;
  while (wait(&status) > 0) failed += !WIFEXITED(status) || WEXITSTATUS(status) != 0;
  printf("children %d txn %ld select %ld update %ld\n", n, txns, selects, updates);
  return failed ? 1 : 0;
}
