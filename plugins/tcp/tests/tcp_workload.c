// SPDX-License-Identifier: Apache-2.0
/*
 * Loopback TCP with known traffic, in one process (a server thread, the client in main):
 *   - N connections to the server on 127.0.0.1: connection i sends (i+1) * 1000 bytes and
 *     receives (i+1) * 500, then the client closes, then the server;
 *   - one connection refused (a port nobody listens on);
 *   - one connection reset: 100 bytes sent, then close with SO_LINGER 0 (an RST);
 *   - 2 connections on ::1 (when the machine has IPv6 loopback): 1500 and 3000 bytes sent,
 *     nothing back.
 * Prints: port=P refused_port=Q v6_port=R (0: no IPv6)
 *
 * Usage: tcp_workload N
 */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

static int n_conns;

static int listener(int family, int* port) {
  int s = socket(family, SOCK_STREAM, 0);
  struct sockaddr_storage a = {0};
  socklen_t len;

  if (s < 0) return -1;
  if (family == AF_INET) {
    struct sockaddr_in* in = (struct sockaddr_in*)&a;
    in->sin_family = AF_INET;
    in->sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    len = sizeof(*in);
  } else {
    struct sockaddr_in6* in6 = (struct sockaddr_in6*)&a;
    in6->sin6_family = AF_INET6;
    in6->sin6_addr = in6addr_loopback;
    len = sizeof(*in6);
  }
  if (bind(s, (struct sockaddr*)&a, len) != 0 || listen(s, 64) != 0) {
    close(s);
    return -1;
  }
  getsockname(s, (struct sockaddr*)&a, &len);
  *port = ntohs(family == AF_INET ? ((struct sockaddr_in*)&a)->sin_port
                                  : ((struct sockaddr_in6*)&a)->sin6_port);
  return s;
}

static int connect_to(int family, int port) {
  int s = socket(family, SOCK_STREAM, 0);
  struct sockaddr_storage a = {0};
  socklen_t len;

  if (family == AF_INET) {
    struct sockaddr_in* in = (struct sockaddr_in*)&a;
    in->sin_family = AF_INET;
    in->sin_port = htons((unsigned short)port);
    in->sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    len = sizeof(*in);
  } else {
    struct sockaddr_in6* in6 = (struct sockaddr_in6*)&a;
    in6->sin6_family = AF_INET6;
    in6->sin6_port = htons((unsigned short)port);
    in6->sin6_addr = in6addr_loopback;
    len = sizeof(*in6);
  }
  if (connect(s, (struct sockaddr*)&a, len) != 0) {
    close(s);
    return -1;
  }
  return s;
}

static int send_all(int s, size_t n) {
  char buf[4096];

  memset(buf, 'x', sizeof(buf));
  while (n) {
    ssize_t w = send(s, buf, n < sizeof(buf) ? n : sizeof(buf), 0);
    if (w <= 0) return -1;
    n -= (size_t)w;
  }
  return 0;
}

static int recv_all(int s, size_t n) {
  char buf[4096];

  while (n) {
    ssize_t r = recv(s, buf, n < sizeof(buf) ? n : sizeof(buf), 0);
    if (r <= 0) return -1;
    n -= (size_t)r;
  }
  return 0;
}

struct server {
  int fd;
  int conns;       /* how many to serve */
  size_t in_unit;  /* connection i receives (i+1) * in_unit... */
  size_t out_unit; /* ...and answers (i+1) * out_unit */
  int reset_last;  /* the last one is reset by the client after 100 bytes */
};

static void* serve(void* arg) {
  struct server* sv = arg;
  char c;

  for (int i = 0; i < sv->conns; i++) {
    int s = accept(sv->fd, NULL, NULL);
    if (s < 0) exit(3);
    if (sv->reset_last && i == sv->conns - 1) {
      recv_all(s, 100);
      while (recv(s, &c, 1, 0) > 0) {
      } /* until the RST */
      close(s);
      continue;
    }
    if (recv_all(s, (size_t)(i + 1) * sv->in_unit) || send_all(s, (size_t)(i + 1) * sv->out_unit))
      exit(4);
    while (recv(s, &c, 1, 0) > 0) {
    } /* the client closes first */
    close(s);
  }
  return NULL;
}

static void client(int family, int port, struct server* sv) {
  for (int i = 0; i < sv->conns; i++) {
    int s = connect_to(family, port);
    if (s < 0) exit(5);
    if (sv->reset_last && i == sv->conns - 1) {
      struct linger l = {1, 0};
      send_all(s, 100);
      usleep(50000); /* the server has read them */
      setsockopt(s, SOL_SOCKET, SO_LINGER, &l, sizeof(l));
      close(s); /* RST */
      continue;
    }
    if (send_all(s, (size_t)(i + 1) * sv->in_unit) || recv_all(s, (size_t)(i + 1) * sv->out_unit))
      exit(6);
    close(s);
  }
}

int main(int argc, char** argv) {
  int port = 0, refused_port = 0, v6_port = 0;
  pthread_t t;

  n_conns = argc > 1 ? atoi(argv[1]) : 10;
  struct server v4 = {listener(AF_INET, &port), n_conns + 1, 1000, 500, 1};
  if (v4.fd < 0) return 2;
  /* A port nobody listens on: bound, then closed. */
  int probe = listener(AF_INET, &refused_port);
  close(probe);

  pthread_create(&t, NULL, serve, &v4);
  client(AF_INET, port, &v4);
  pthread_join(t, NULL);
  if (connect_to(AF_INET, refused_port) >= 0) return 7;

  struct server v6 = {listener(AF_INET6, &v6_port), 2, 1500, 0, 0};
  if (v6.fd >= 0) {
    pthread_create(&t, NULL, serve, &v6);
    client(AF_INET6, v6_port, &v6);
    pthread_join(t, NULL);
  } else {
    v6_port = 0;
  }
  printf("port=%d refused_port=%d v6_port=%d\n", port, refused_port, v6_port);
  return 0;
}
