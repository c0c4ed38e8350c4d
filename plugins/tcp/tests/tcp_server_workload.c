// SPDX-License-Identifier: Apache-2.0
/*
 * Loopback servers whose connections are accepted by one process and served by another, as
 * pre-fork servers do, and one that holds many connections open at once:
 *
 *   fork N        the listener forks one child per accepted connection; the child echoes
 *                 what it receives until the client's EOF (PostgreSQL's postmaster does this)
 *   pass N W H    the listener reads H bytes of each connection, then hands its fd over a
 *                 unix socket (SCM_RIGHTS) to one of W worker processes, which echoes the
 *                 rest
 *   hold N        N connections to the process itself, all open at once, 100 bytes each way
 *   share P       one accepted connection written by P children of the listener in turn,
 *                 child i sending (i + 1) * 100 bytes (P processes serving one connection)
 *
 * A client process makes the N connections one after another: connection i sends
 * 1000 + 37 * i bytes, shuts down its sending side and reads the echo to EOF.
 * Prints (each line one write(), so children's lines never mix):
 *   listener=PID port=P client=PID
 *   served port=CLIENT_PORT pid=PID rx=BYTES tx=BYTES       (per connection, by its server)
 *   header port=CLIENT_PORT pid=PID rx=H                    (pass with H > 0, the listener)
 *   held=N port=P                                           (hold)
 *   sender pid=PID tx=BYTES                                 (share, per child in order)
 */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

static void say(const char* fmt, ...) {
  char line[256];
  va_list ap;

  va_start(ap, fmt);
  int n = vsnprintf(line, sizeof(line), fmt, ap);
  va_end(ap);
  if (write(1, line, (size_t)n) != n) _exit(20);
}

static size_t conn_bytes(int i) {
  return 1000 + 37 * (size_t)i;
}

static int listener(int* port) {
  int s = socket(AF_INET, SOCK_STREAM, 0);
  struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
  socklen_t len = sizeof(a);

  if (s < 0 || bind(s, (struct sockaddr*)&a, len) || listen(s, 512)) exit(2);
  getsockname(s, (struct sockaddr*)&a, &len);
  *port = ntohs(a.sin_port);
  return s;
}

static int connect_to(int port) {
  int s = socket(AF_INET, SOCK_STREAM, 0);
  struct sockaddr_in a = {.sin_family = AF_INET,
                          .sin_port = htons((unsigned short)port),
                          .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};

  if (s < 0 || connect(s, (struct sockaddr*)&a, sizeof(a))) exit(3);
  return s;
}

static int peer_port(int s) {
  struct sockaddr_in a;
  socklen_t len = sizeof(a);

  getpeername(s, (struct sockaddr*)&a, &len);
  return ntohs(a.sin_port);
}

static void send_all(int s, size_t n) {
  char buf[4096];

  memset(buf, 'x', sizeof(buf));
  while (n) {
    ssize_t w = send(s, buf, n < sizeof(buf) ? n : sizeof(buf), 0);
    if (w <= 0) exit(4);
    n -= (size_t)w;
  }
}

static size_t recv_n(int s, size_t n) {
  char buf[4096];
  size_t got = 0;

  while (got < n) {
    ssize_t r = recv(s, buf, n - got < sizeof(buf) ? n - got : sizeof(buf), 0);
    if (r <= 0) break;
    got += (size_t)r;
  }
  return got;
}

/* Echoes until EOF, then closes; says what it served. */
static void serve(int s) {
  char buf[4096];
  size_t rx = 0, tx = 0;
  ssize_t r;
  int port = peer_port(s);

  while ((r = recv(s, buf, sizeof(buf), 0)) > 0) {
    rx += (size_t)r;
    send_all(s, (size_t)r);
    tx += (size_t)r;
  }
  close(s);
  say("served port=%d pid=%d rx=%zu tx=%zu\n", port, (int)getpid(), rx, tx);
}

/* Each connection sends its bytes and expects them back less what the listener kept. */
static pid_t client(int port, int n, size_t header) {
  pid_t pid = fork();

  if (pid) return pid;
  for (int i = 0; i < n; i++) {
    int s = connect_to(port);
    send_all(s, conn_bytes(i));
    shutdown(s, SHUT_WR);
    if (recv_n(s, (size_t)-1) != conn_bytes(i) - header) _exit(5);
    close(s);
  }
  _exit(0);
}

static int wait_all(void) {
  int status, failed = 0;

  while (wait(&status) > 0) failed |= !WIFEXITED(status) || WEXITSTATUS(status) != 0;
  return failed ? 6 : 0;
}

static int fork_per_connection(int n) {
  int port, l = listener(&port);
  pid_t c = client(port, n, 0);

  say("listener=%d port=%d client=%d\n", (int)getpid(), port, (int)c);
  for (int i = 0; i < n; i++) {
    int s = accept(l, NULL, NULL);
    if (s < 0) return 7;
    if (fork() == 0) {
      close(l);
      serve(s);
      _exit(0);
    }
    close(s);
    while (waitpid(-1, NULL, WNOHANG) > 0) {
    }
  }
  return wait_all();
}

static void send_fd(int via, int fd) {
  char byte = 0, ctl[CMSG_SPACE(sizeof(int))] = {0};
  struct iovec iov = {&byte, 1};
  struct msghdr m = {
      .msg_iov = &iov, .msg_iovlen = 1, .msg_control = ctl, .msg_controllen = sizeof(ctl)};
  struct cmsghdr* cm = CMSG_FIRSTHDR(&m);

  cm->cmsg_level = SOL_SOCKET;
  cm->cmsg_type = SCM_RIGHTS;
  cm->cmsg_len = CMSG_LEN(sizeof(int));
  memcpy(CMSG_DATA(cm), &fd, sizeof(int));
  if (sendmsg(via, &m, 0) != 1) exit(8);
}

static int recv_fd(int via) {
  char byte, ctl[CMSG_SPACE(sizeof(int))];
  struct iovec iov = {&byte, 1};
  struct msghdr m = {
      .msg_iov = &iov, .msg_iovlen = 1, .msg_control = ctl, .msg_controllen = sizeof(ctl)};
  struct cmsghdr* cm;
  int fd;

  if (recvmsg(via, &m, 0) != 1) return -1; /* the listener is done */
  cm = CMSG_FIRSTHDR(&m);
  if (!cm || cm->cmsg_type != SCM_RIGHTS) return -1;
  memcpy(&fd, CMSG_DATA(cm), sizeof(int));
  return fd;
}

static int pass_to_workers(int n, int workers, size_t header) {
  int port, l = listener(&port);
  int to[64];

  if (workers < 1 || workers > 64) return 9;
  for (int w = 0; w < workers; w++) {
    int sv[2];
    if (socketpair(AF_UNIX, SOCK_SEQPACKET, 0, sv)) return 10;
    if (fork() == 0) {
      close(l);
      close(sv[0]);
      for (int k = 0; k < w; k++) close(to[k]);
      int fd;
      while ((fd = recv_fd(sv[1])) >= 0) serve(fd);
      _exit(0);
    }
    close(sv[1]);
    to[w] = sv[0];
  }
  pid_t c = client(port, n, header);
  say("listener=%d port=%d client=%d\n", (int)getpid(), port, (int)c);
  for (int i = 0; i < n; i++) {
    int s = accept(l, NULL, NULL);
    if (s < 0) return 7;
    if (header) {
      if (recv_n(s, header) != header) return 11;
      say("header port=%d pid=%d rx=%zu\n", peer_port(s), (int)getpid(), header);
    }
    send_fd(to[i % workers], s);
    close(s);
  }
  for (int w = 0; w < workers; w++) close(to[w]);
  return wait_all();
}

static int hold(int n) {
  int port, l = listener(&port);
  int* fds = calloc(2 * (size_t)n, sizeof(int));

  for (int i = 0; i < n; i++) {
    fds[2 * i] = connect_to(port);
    fds[2 * i + 1] = accept(l, NULL, NULL);
    if (fds[2 * i + 1] < 0) return 7;
  }
  for (int i = 0; i < n; i++) {
    send_all(fds[2 * i], 100);
    send_all(fds[2 * i + 1], 100);
    if (recv_n(fds[2 * i + 1], 100) != 100 || recv_n(fds[2 * i], 100) != 100) return 12;
  }
  for (int i = 0; i < 2 * n; i++) close(fds[i]);
  say("held=%d port=%d\n", n, port);
  return 0;
}

static int share(int senders) {
  int port, l = listener(&port);
  size_t total = 0;
  pid_t c;

  for (int i = 0; i < senders; i++) total += (size_t)(i + 1) * 100;
  c = fork();
  if (c == 0) {
    int s = connect_to(port);
    _exit(recv_n(s, (size_t)-1) == total ? 0 : 5);
  }
  say("listener=%d port=%d client=%d\n", (int)getpid(), port, (int)c);
  int s = accept(l, NULL, NULL);
  if (s < 0) return 7;
  for (int i = 0; i < senders; i++) {
    pid_t p = fork();
    if (p == 0) {
      send_all(s, (size_t)(i + 1) * 100);
      say("sender pid=%d tx=%d\n", (int)getpid(), (i + 1) * 100);
      _exit(0);
    }
    waitpid(p, NULL, 0); /* one after another: the order of the servers is known */
  }
  close(s);
  return wait_all();
}

int main(int argc, char** argv) {
  int n = argc > 2 ? atoi(argv[2]) : 10;

  if (argc > 1 && !strcmp(argv[1], "fork")) return fork_per_connection(n);
  if (argc > 1 && !strcmp(argv[1], "pass"))
    return pass_to_workers(n, argc > 3 ? atoi(argv[3]) : 4, argc > 4 ? (size_t)atoi(argv[4]) : 0);
  if (argc > 1 && !strcmp(argv[1], "hold")) return hold(n);
  if (argc > 1 && !strcmp(argv[1], "share")) return share(n);
  fprintf(stderr, "usage: tcp_server_workload fork N | pass N WORKERS HEADER | hold N | share P\n");
  return 1;
}
