// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * TCP connections from their state changes (sock:inet_sock_set_state): each connection is
 * tracked from its first state change to TCP_CLOSE, where the bytes the socket counted
 * are read (tcp_sock through CO-RE, as tcplife does), and leaves as one ring record when
 * its socket is destroyed (tcp:tcp_destroy_sock), with its addresses, owner, lifetime,
 * handshake time, retransmits and resets (an abortive close's RST comes after TCP_CLOSE).
 * Retransmits and resets (tcp:* tracepoints) are counted on the connection; where the
 * kernel has sock:sock_send_length / sock_recv_length, the application's send and
 * receive sizes too.
 *
 * Whose connection: state changes often run in softirq context, on behalf of nobody in
 * particular, so processes are named only where they act. The opener is the process that
 * ran connect() (SYN_SENT) or accept() (fexit or kretprobe on inet_csk_accept where the
 * kernel allows them, else the accept syscalls' exit tracepoints and the returned fd). The
 * servers are the processes that sent or received on it (up to TCP_MAX_SERVERS, each with
 * its own sizes), else the one that closed it (FIN_WAIT1, LAST_ACK): a pre-fork server's
 * listener accepts and a forked child, or a worker the fd was passed to, does the I/O.
 * The connection is the target's when any of them passed the session's filter.
 *
 * Every connection tracked costs a `conns` slot; one that finds the table full is
 * remembered in `untracked` so it is counted once, never half-tracked later, and told
 * apart at its end as the target's or another process's.
 *
 * The classic tracepoints' fields used here have kept their offsets since 4.16; the
 * tcp:* and sock_*_length contexts are read at those offsets, not through a vmlinux type
 * whose name changed between kernels.
 */
#include "vmlinux.h"
#include <bpf/bpf_core_read.h>
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>

#include "loupe/emit.bpf.h"
#include "loupe/filter.bpf.h"
#include "loupe/task_file.bpf.h"
#include "tcp.h"

#define IPPROTO_TCP_ 6
#define AF_INET_ 2
#define TCP_ESTABLISHED_ 1
#define TCP_SYN_SENT_ 2
#define TCP_SYN_RECV_ 3
#define TCP_FIN_WAIT1_ 4
#define TCP_CLOSE_ 7
#define TCP_LAST_ACK_ 9
#define TCP_LISTEN_ 10

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 16384); /* max_connections */
	__type(key, __u64);	    /* struct sock * */
	__type(value, struct tcp_conn);
} conns SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct tcp_counters);
} counters SEC(".maps");

/* Connections that found `conns` full, until their socket is destroyed: 1 once a process of
 * the target was seen acting on one. Twice max_connections: every process's count here. */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 32768);
	__type(key, __u64); /* struct sock * */
	__type(value, __u32);
} untracked SEC(".maps");

LOUPE_RING(closes, 1024 * 1024);

/* tcp:tcp_retransmit_skb, tcp:tcp_send_reset: skbaddr, then skaddr. */
struct tp_sk_skb {
	__u64 common;
	const void *skbaddr;
	const void *skaddr;
};

/* tcp:tcp_receive_reset: skaddr first. */
struct tp_sk {
	__u64 common;
	const void *skaddr;
};

/* sock:sock_send_length / sock_recv_length (6.3+). */
struct tp_msg_length {
	__u64 common;
	void *sk;
	__u16 family;
	__u16 protocol;
	int ret;
};

static __always_inline struct tcp_counters *get_counters(void)
{
	__u32 zero = 0;

	return bpf_map_lookup_elem(&counters, &zero);
}

/* The current process (0: the idle task's softirq). The connection is the target's once one
 * of the processes acting on it passes the session's filter. */
static __always_inline __u32 current_process(struct tcp_conn *c)
{
	__u64 id = bpf_get_current_pid_tgid();

	if ((id >> 32) && !c->owner_ok)
		c->owner_ok = loupe_filter_pass(id);
	return id >> 32;
}

/* connect() or accept() ran in the current task. */
static __always_inline void bind_opener(struct tcp_conn *c)
{
	__u32 pid = current_process(c);

	if (!pid || c->opener_pid)
		return;
	c->opener_pid = pid;
	bpf_get_current_comm(c->opener_comm, sizeof(c->opener_comm));
}

/* The current process's slot among the servers, taken if free; NULL past TCP_MAX_SERVERS.
 * Two processes' first calls on one connection at the same instant can both take a free
 * slot (no compare-and-swap before BPF v3): the loser's calls then go to the winner. */
static __always_inline struct tcp_server *server_slot(struct tcp_conn *c)
{
	__u32 pid = current_process(c);

	if (!pid)
		return NULL;
#pragma unroll
	for (int i = 0; i < TCP_MAX_SERVERS; i++) {
		struct tcp_server *s = &c->servers[i];

		if (s->pid == pid)
			return s;
		if (s->pid)
			continue;
		s->pid = pid;
		bpf_get_current_comm(s->comm, sizeof(s->comm));
		return s;
	}
	return NULL;
}

/* close() or shutdown() in the current task: its server when no process did I/O. */
static __always_inline void bind_closer(struct tcp_conn *c)
{
	if (!c->servers[0].pid)
		server_slot(c);
	else
		current_process(c);
}

/* A process acted on a connection that is not tracked: remember whether it is the target. */
static __always_inline void untracked_seen(__u64 sk)
{
	__u32 *v = bpf_map_lookup_elem(&untracked, &sk);
	__u64 id;

	if (!v || *v)
		return;
	id = bpf_get_current_pid_tgid();
	if ((id >> 32) && loupe_filter_pass(id))
		*v = 1;
}

/* TCP_CLOSE: the byte counts, while the socket still has them. Payload only: bytes_sent
 * counts payload (with retransmits, taken off), bytes_received the receive sequence
 * space, where a FIN takes one (SOCK_DONE: tcp_fin() saw it). */
static __always_inline void closed(__u64 sk, struct tcp_conn *c, __u64 now)
{
	struct tcp_sock *tp = (struct tcp_sock *)sk;
	__u64 flags = BPF_CORE_READ((struct sock *)sk, __sk_common.skc_flags);
	__u64 rx = BPF_CORE_READ(tp, bytes_received);

	c->close_ns = now;
	c->tx_bytes = BPF_CORE_READ(tp, bytes_sent) - BPF_CORE_READ(tp, bytes_retrans);
	c->rx_bytes = rx && (flags & (1ULL << 1 /* SOCK_DONE */)) ? rx - 1 : rx;
}

/* The connection's record leaves (the target's only) and its slot goes. */
static __always_inline void finish(__u64 sk, struct tcp_conn *c)
{
	struct tcp_counters *cnt = get_counters();
	struct tcp_close_event *e;

	if (cnt && !c->owner_ok)
		cnt->other++;
	if (cnt && c->owner_ok) {
		cnt->closed++;
		e = LOUPE_RESERVE(closes, struct tcp_close_event, TCP_RECORD_CLOSE,
				  TCP_RECORD_CLOSE_VERSION);
		if (e) { /* else counted in closes_lost */
			__builtin_memcpy(&e->conn, c, sizeof(e->conn));
			LOUPE_SUBMIT(closes, e);
		}
	}
	bpf_map_delete_elem(&conns, &sk);
}

/* A new connection found `conns` full: counted once, and remembered so that its later
 * state changes neither count it again nor track the rest of it. */
static __always_inline void not_tracked(__u64 sk, struct tcp_counters *cnt)
{
	__u32 zero = 0;
	long err = bpf_map_update_elem(&untracked, &sk, &zero, BPF_NOEXIST);

	if (err == -17 /* EEXIST */)
		return; /* another CPU's state change of it counted it */
	cnt->conns_full++;
	if (err)
		cnt->untracked_full++;
}

/* The connection's addresses, from its state change. */
static __always_inline void describe(struct tcp_conn *c,
				     struct trace_event_raw_inet_sock_set_state *ctx)
{
	c->family = ctx->family;
	c->sport = ctx->sport;
	c->dport = ctx->dport;
	/* Through a helper: the verifier refuses byte copies at a relocated ctx offset. */
	if (ctx->family == AF_INET_) {
		bpf_probe_read_kernel(c->saddr, 4, ctx->saddr);
		bpf_probe_read_kernel(c->daddr, 4, ctx->daddr);
	} else {
		bpf_probe_read_kernel(c->saddr, 16, ctx->saddr_v6);
		bpf_probe_read_kernel(c->daddr, 16, ctx->daddr_v6);
	}
}

SEC("tracepoint/sock/inet_sock_set_state")
int tcp_state(struct trace_event_raw_inet_sock_set_state *ctx)
{
	struct tcp_counters *cnt;
	struct tcp_conn *c, n = {};
	__u64 sk = (__u64)ctx->skaddr, now;
	int oldstate = ctx->oldstate, newstate = ctx->newstate;
	long err;

	if (ctx->protocol != IPPROTO_TCP_)
		return 0;
	cnt = get_counters();
	if (!cnt)
		return 0;
	cnt->state_changes++;
	if (oldstate == TCP_LISTEN_ || newstate == TCP_LISTEN_) {
		bpf_map_delete_elem(&conns, &sk); /* a listener is no connection */
		return 0;
	}
	now = bpf_ktime_get_ns();
	c = bpf_map_lookup_elem(&conns, &sk);
	if (!c) {
		if (newstate == TCP_CLOSE_)
			return 0; /* never seen alive */
		if (bpf_map_lookup_elem(&untracked, &sk)) {
			/* A connection opening cannot have been lost before: a socket at this
			 * address went without tcp_destroy_sock, and the entry is stale. */
			if (newstate == TCP_SYN_SENT_ || oldstate == TCP_SYN_RECV_) {
				bpf_map_delete_elem(&untracked, &sk);
			} else {
				if (newstate == TCP_FIN_WAIT1_ || newstate == TCP_LAST_ACK_)
					untracked_seen(sk);
				return 0;
			}
		}
		n.birth_ns = now;
		describe(&n, ctx);
		if (newstate == TCP_SYN_SENT_) {
			n.role = TCP_ROLE_ACTIVE;
			n.syn_ns = now;
			bind_opener(&n); /* connect() runs in its caller's context */
		} else if (oldstate == TCP_SYN_RECV_) {
			n.role = TCP_ROLE_PASSIVE;
		}
		/* -EEXIST: another CPU's state change of it came first, and it is tracked. */
		err = bpf_map_update_elem(&conns, &sk, &n, BPF_NOEXIST);
		if (err && err != -17 /* EEXIST */) {
			not_tracked(sk, cnt);
			if (newstate == TCP_SYN_SENT_)
				untracked_seen(sk);
			return 0;
		}
		c = bpf_map_lookup_elem(&conns, &sk);
		if (!c)
			return 0;
	}
	if (!c->family)
		describe(c, ctx); /* accept() returned it before its first state change ran */
	if (!c->sport)
		c->sport = ctx->sport; /* connect() picks the port after SYN_SENT */
	if (newstate == TCP_ESTABLISHED_ && !c->established_ns)
		c->established_ns = now;
	if (newstate == TCP_FIN_WAIT1_ || newstate == TCP_LAST_ACK_)
		bind_closer(c); /* close() or shutdown() in a process */
	if (newstate == TCP_CLOSE_ && !c->close_ns)
		closed(sk, c, now);
	return 0;
}

SEC("tracepoint/tcp/tcp_destroy_sock")
int tcp_destroy(struct tp_sk *ctx)
{
	__u64 sk = (__u64)ctx->skaddr;
	struct tcp_conn *c = bpf_map_lookup_elem(&conns, &sk);
	struct tcp_counters *cnt;
	__u32 *lost;

	if (!c) {
		lost = bpf_map_lookup_elem(&untracked, &sk);
		cnt = get_counters();
		if (lost && cnt) {
			if (*lost)
				cnt->lost_target++;
			else
				cnt->lost_other++;
		}
		if (lost)
			bpf_map_delete_elem(&untracked, &sk);
		return 0;
	}
	if (!c->close_ns)
		closed(sk, c, bpf_ktime_get_ns());
	finish(sk, c);
	return 0;
}

SEC("tracepoint/tcp/tcp_retransmit_skb")
int tcp_retransmit(struct tp_sk_skb *ctx)
{
	__u64 sk = (__u64)ctx->skaddr;
	struct tcp_conn *c = bpf_map_lookup_elem(&conns, &sk);

	if (c)
		__sync_fetch_and_add(&c->retransmits, 1);
	return 0;
}

SEC("tracepoint/tcp/tcp_send_reset")
int tcp_send_reset(struct tp_sk_skb *ctx)
{
	__u64 sk = (__u64)ctx->skaddr;
	struct tcp_conn *c = sk ? bpf_map_lookup_elem(&conns, &sk) : NULL;

	if (c)
		__sync_fetch_and_add(&c->resets_sent, 1);
	return 0;
}

SEC("tracepoint/tcp/tcp_receive_reset")
int tcp_receive_reset(struct tp_sk *ctx)
{
	__u64 sk = (__u64)ctx->skaddr;
	struct tcp_conn *c = bpf_map_lookup_elem(&conns, &sk);

	if (c)
		__sync_fetch_and_add(&c->resets_received, 1);
	return 0;
}

static __always_inline void app_bytes(__u64 sk, int ret, bool tx)
{
	struct tcp_server *s;
	struct tcp_counters *cnt;
	struct tcp_conn *c;

	if (ret <= 0)
		return;
	c = bpf_map_lookup_elem(&conns, &sk);
	if (!c) {
		untracked_seen(sk);
		return;
	}
	/* A send or a receive runs in its caller's context: that process serves it. */
	s = server_slot(c);
	if (tx) {
		__sync_fetch_and_add(&c->app_tx_bytes, (__u64)ret);
		__sync_fetch_and_add(&c->sends, 1);
		if (s) {
			__sync_fetch_and_add(&s->app_tx_bytes, (__u64)ret);
			__sync_fetch_and_add(&s->sends, 1);
		}
	} else {
		__sync_fetch_and_add(&c->app_rx_bytes, (__u64)ret);
		__sync_fetch_and_add(&c->recvs, 1);
		if (s) {
			__sync_fetch_and_add(&s->app_rx_bytes, (__u64)ret);
			__sync_fetch_and_add(&s->recvs, 1);
		}
	}
	if (!s) {
		__sync_fetch_and_add(&c->calls_unattributed, 1);
		cnt = get_counters();
		if (cnt)
			cnt->calls_unattributed++;
	}
}

SEC("tracepoint/sock/sock_send_length")
int tcp_send_length(struct tp_msg_length *ctx)
{
	if (ctx->protocol == IPPROTO_TCP_)
		app_bytes((__u64)ctx->sk, ctx->ret, true);
	return 0;
}

SEC("tracepoint/sock/sock_recv_length")
int tcp_recv_length(struct tp_msg_length *ctx)
{
	if (ctx->protocol == IPPROTO_TCP_)
		app_bytes((__u64)ctx->sk, ctx->ret, false);
	return 0;
}

/* Before sock_*_length (6.3): the TCP functions' returns, where fexit works. */
SEC("fexit/tcp_sendmsg")
int BPF_PROG(tcp_sendmsg_fexit, struct sock *sk)
{
	__u64 ret = 0;

	bpf_get_func_ret(ctx, &ret);
	app_bytes((__u64)sk, (int)ret, true);
	return 0;
}

SEC("fexit/tcp_recvmsg")
int BPF_PROG(tcp_recvmsg_fexit, struct sock *sk)
{
	__u64 ret = 0;

	bpf_get_func_ret(ctx, &ret);
	app_bytes((__u64)sk, (int)ret, false);
	return 0;
}

/* accept() returned `sk` to the application, in its own context. The kernel queues a new
 * connection for accept() before the softirq that made it runs its SYN_RECV -> ESTABLISHED
 * change, so on another CPU accept() can return it first (once in 200 fork-per-connection
 * accepts in a loaded guest): the entry is made here then, and described at that change. */
static __always_inline void accepted(__u64 sk)
{
	struct tcp_conn *c, n = {};
	struct tcp_counters *cnt;
	long err;

	if (!sk)
		return;
	c = bpf_map_lookup_elem(&conns, &sk);
	if (!c && bpf_map_lookup_elem(&untracked, &sk)) {
		untracked_seen(sk);
		return;
	}
	if (!c) {
		cnt = get_counters();
		if (!cnt)
			return;
		n.birth_ns = bpf_ktime_get_ns();
		n.role = TCP_ROLE_PASSIVE;
		err = bpf_map_update_elem(&conns, &sk, &n, BPF_NOEXIST);
		if (err && err != -17 /* EEXIST: the state change came first after all */) {
			not_tracked(sk, cnt);
			untracked_seen(sk);
			return;
		}
		c = bpf_map_lookup_elem(&conns, &sk);
		if (!c)
			return;
	}
	if (c->accepted_ns)
		return;
	c->accepted_ns = bpf_ktime_get_ns();
	bind_opener(c);
}

SEC("fexit/inet_csk_accept")
int BPF_PROG(tcp_accept_fexit)
{
	__u64 ret = 0;

	/* The return value, whatever the signature (it changed in 6.10). */
	bpf_get_func_ret(ctx, &ret);
	accepted(ret);
	return 0;
}

SEC("kretprobe/inet_csk_accept")
int BPF_KRETPROBE(tcp_accept_kretprobe, void *ret)
{
	accepted((__u64)ret);
	return 0;
}

/* syscalls:sys_exit_accept / sys_exit_accept4. */
struct tp_sys_exit {
	__u64 common;
	int nr;
	long ret;
};

static __always_inline void accepted_fd(long fd)
{
	struct file *f;
	struct socket *sock;

	if (fd < 0)
		return;
	f = loupe_task_file(fd);
	if (!f)
		return;
	sock = BPF_CORE_READ(f, private_data);
	if (sock)
		accepted((__u64)BPF_CORE_READ(sock, sk));
}

SEC("tracepoint/syscalls/sys_exit_accept4")
int tcp_accept4_exit(struct tp_sys_exit *ctx)
{
	accepted_fd(ctx->ret);
	return 0;
}

SEC("tracepoint/syscalls/sys_exit_accept")
int tcp_accept_exit(struct tp_sys_exit *ctx)
{
	accepted_fd(ctx->ret);
	return 0;
}

char LICENSE[] SEC("license") = "Dual BSD/GPL";
