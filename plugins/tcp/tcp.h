/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * Types shared by tcp.bpf.c and the user-space plugin: fixed-width fields only.
 */
#ifndef LOUPE_TCP_H
#define LOUPE_TCP_H

#ifndef __bpf__
#include <linux/types.h>
#endif

#define TCP_COMM_LEN 16

/* Who opened the connection, from the states it went through. */
enum tcp_role {
  TCP_ROLE_UNKNOWN = 0, /* first seen past the handshake (the session started later) */
  TCP_ROLE_ACTIVE = 1,  /* connect(): SYN_SENT */
  TCP_ROLE_PASSIVE = 2, /* accept(): SYN_RECV */
};

/* A process that did the connection's I/O (a send or a receive; else the one that closed
 * it). A connection accepted by one process and served by another (fork after accept, an fd
 * passed over a unix socket) has them here, and its acceptor in `opener_pid`. */
#define TCP_MAX_SERVERS 4

struct tcp_server {
  __u32 pid; /* 0: free slot */
  __u32 sends, recvs;
  __u32 pad;
  __u64 app_tx_bytes; /* its own sends and receives (sock_*_length or tcp_*msg) */
  __u64 app_rx_bytes;
  char comm[TCP_COMM_LEN];
};

/* One connection while it lives (keyed by its struct sock address). */
struct tcp_conn {
  __u64 birth_ns;       /* first state change seen */
  __u64 syn_ns;         /* SYN_SENT or SYN_RECV */
  __u64 established_ns; /* 0: never established */
  __u64 app_tx_bytes;   /* sock_send_length (where the kernel has it): every process's */
  __u64 app_rx_bytes;
  __u32 sends, recvs;
  __u32 opener_pid; /* connect() or accept() ran in it (0: not seen) */
  __u32 role;
  __u32 retransmits;
  __u32 resets_sent;
  __u32 resets_received;
  __u32 owner_ok;    /* the opener or a server passed the session's filter */
  __u64 close_ns;    /* TCP_CLOSE seen; the record leaves when the socket is destroyed */
  __u64 tx_bytes;    /* at TCP_CLOSE: payload sent once (bytes_sent - bytes_retrans) */
  __u64 rx_bytes;    /* at TCP_CLOSE: payload received (bytes_received, less a FIN) */
  __u64 accepted_ns; /* accept() returned it to the application (0: not seen) */
  __u16 family;
  __u16 sport; /* host order */
  __u16 dport;
  __u16 pad;
  __u8 saddr[16]; /* IPv4 in the first 4 bytes */
  __u8 daddr[16];
  char opener_comm[TCP_COMM_LEN];
  __u32 calls_unattributed; /* sends/receives by processes past TCP_MAX_SERVERS */
  __u32 pad2;
  struct tcp_server servers[TCP_MAX_SERVERS];
};

/* Per-CPU counters, summed in user space. */
struct tcp_counters {
  __u64 state_changes;      /* TCP state changes seen (every process) */
  __u64 conns_full;         /* a new connection found the table full: not tracked (once each) */
  __u64 closed;             /* connections of the target that closed (events sent or lost) */
  __u64 other;              /* connections that closed without an owner in the target */
  __u64 lost_target;        /* untracked connections of the target, counted at their end */
  __u64 lost_other;         /* untracked connections of no process of the target */
  __u64 untracked_full;     /* an untracked connection could not be remembered as such */
  __u64 calls_unattributed; /* sends/receives by a process past TCP_MAX_SERVERS */
};

/* Ring record: one connection, when its socket is destroyed (after TCP_CLOSE: an abortive
 * close sends its RST after the state change, and it belongs to the connection). */
#define TCP_RECORD_CLOSE 1
#define TCP_RECORD_CLOSE_VERSION 3

struct tcp_close_event {
  __u16 type;
  __u16 version;
  __u32 len;
  struct tcp_conn conn; /* lifetime: close_ns - birth_ns; handshake: established - syn */
};

#endif /* LOUPE_TCP_H */
