// SPDX-License-Identifier: Apache-2.0
#include "tcp_reporter.hpp"

#include <arpa/inet.h>

#include <cstring>

#include "loupe/sdk/histogram.hpp"
#include "loupe/sdk/percpu.hpp"
#include "loupe/sdk/records.hpp"

namespace loupe::tcp {

std::string address_text(std::uint16_t family, const std::uint8_t* bytes) {
  char buf[INET6_ADDRSTRLEN] = {};
  if (!inet_ntop(family == AF_INET ? AF_INET : AF_INET6, bytes, buf, sizeof(buf))) return "?";
  return buf;
}

namespace {

const char* role_name(std::uint32_t role) {
  switch (role) {
    case TCP_ROLE_ACTIVE: return "out";
    case TCP_ROLE_PASSIVE: return "in";
  }
  return "unknown";
}

void add(std::uint64_t& into, std::uint64_t v) {
  into += v;
}

}  // namespace

TcpReporter::TcpReporter(const sdk::Host& host, int counters_fd, std::size_t max_peers)
    : host_(host), counters_fd_(counters_fd), max_peers_(max_peers) {}

int TcpReporter::decode(const void* data, std::uint32_t len) {
  tcp_close_event e;
  if (len < sizeof(e)) return LOUPE_ERR_INVALID_ARG;
  std::memcpy(&e, data, sizeof(e));
  const tcp_conn& c = e.conn;
  const std::string local = address_text(c.family, c.saddr);
  const std::string remote = address_text(c.family, c.daddr);
  const bool established = c.established_ns != 0;
  const bool failed = c.role == TCP_ROLE_ACTIVE && !established;
  const std::uint64_t resets = c.resets_sent + c.resets_received;
  const std::uint64_t lifetime = c.close_ns > c.birth_ns ? c.close_ns - c.birth_ns : 0;
  const std::uint64_t connect = c.established_ns && c.syn_ns ? c.established_ns - c.syn_ns : 0;
  // Accepted: how long the established connection waited in the listener's queue.
  const bool accepted = c.accepted_ns != 0 && c.established_ns != 0;
  const std::uint64_t accept_wait =
      accepted && c.accepted_ns > c.established_ns ? c.accepted_ns - c.established_ns : 0;

  // Who: the processes that sent or received on it (else the one that closed it), and the
  // one whose connect() or accept() opened it, which may be none of them (a pre-fork
  // server's listener).
  struct Server {
    std::uint32_t pid;
    std::string comm;
    const tcp_server* s;
  };
  std::vector<Server> servers;
  std::string server_pids;
  for (const tcp_server& s : c.servers) {
    if (!s.pid) continue;
    servers.push_back({s.pid, std::string(s.comm, strnlen(s.comm, TCP_COMM_LEN)), &s});
    server_pids += (server_pids.empty() ? "" : ",") + std::to_string(s.pid);
  }
  const std::string opener_comm(c.opener_comm, strnlen(c.opener_comm, TCP_COMM_LEN));
  // Its process: the server that moved the most bytes (the first to act on a tie), else
  // the opener.
  const Server* main = nullptr;
  for (const Server& s : servers)
    if (!main ||
        s.s->app_tx_bytes + s.s->app_rx_bytes > main->s->app_tx_bytes + main->s->app_rx_bytes)
      main = &s;
  const std::uint32_t pid = main ? main->pid : c.opener_pid;
  const std::string comm = main ? main->comm : opener_comm;

  sdk::RecordBuilder rb(LOUPE_RECORD_EVENT, "tcp_connection");
  rb.label("direction", role_name(c.role));
  rb.event_time(host_.now_ns(LOUPE_CLOCK_REALTIME))
      .field("pid", static_cast<std::int64_t>(pid))
      .field("comm", comm);
  if (c.opener_pid) {
    const char* opener = c.accepted_ns ? "acceptor" : "connector";
    rb.field(std::string(opener) + "_pid", static_cast<std::int64_t>(c.opener_pid))
        .field(std::string(opener) + "_comm", opener_comm);
  }
  if (!servers.empty()) rb.field("server_pids", server_pids);
  rb.field("direction", std::string(role_name(c.role)))
      .field("family", std::string(c.family == AF_INET ? "ipv4" : "ipv6"))
      .field("local", local)
      .field_u("local_port", c.sport)
      .field("remote", remote)
      .field_u("remote_port", c.dport)
      .field("outcome", std::string(failed        ? "failed"
                                    : resets      ? "reset"
                                    : established ? "closed"
                                                  : "not_established"))
      .field_u("lifetime_ns", lifetime)
      .field_u("connect_ns", connect)
      .field_u("tx_bytes", c.tx_bytes)
      .field_u("rx_bytes", c.rx_bytes)
      .field_u("retransmits", c.retransmits)
      .field_u("resets_sent", c.resets_sent)
      .field_u("resets_received", c.resets_received);
  if (accepted) rb.field_u("accept_wait_ns", accept_wait);
  if (c.sends || c.recvs)
    rb.field_u("app_tx_bytes", c.app_tx_bytes)
        .field_u("app_rx_bytes", c.app_rx_bytes)
        .field_u("sends", c.sends)
        .field_u("recvs", c.recvs);
  if (c.calls_unattributed) rb.field_u("calls_unattributed", c.calls_unattributed);
  const int rc = rb.emit(host_);

  std::lock_guard lock(mu_);
  PeerKey key = c.role == TCP_ROLE_PASSIVE
                    ? PeerKey{"in", remote, std::to_string(c.sport)}
                    : PeerKey{role_name(c.role), remote + ":" + std::to_string(c.dport), ""};
  auto it = peers_.find(key);
  if (it == peers_.end()) {
    if (peers_.size() >= max_peers_) {
      ++peers_full_;
      key = PeerKey{"other", "(over max_peers)", ""};
    }
    it = peers_.try_emplace(key).first;
  }
  auto charge = [&](Totals& t, std::uint64_t tx, std::uint64_t rx) {
    add(t.connections, 1);
    add(t.failed, failed ? 1 : 0);
    add(t.tx, tx);
    add(t.rx, rx);
    add(t.retransmits, c.retransmits);
    add(t.resets, resets);
    if (connect) sdk::hist_add(t.connect, connect);
    if (accepted) sdk::hist_add(t.accept_wait, accept_wait);
    sdk::hist_add(t.lifetime, lifetime);
  };
  charge(it->second, c.tx_bytes, c.rx_bytes);
  // Per process: the socket's payload goes to the one process that did its I/O; shared by
  // several, each is charged what it sent and received itself. None seen: the opener.
  if (servers.empty()) {
    charge(procs_[{c.opener_pid, opener_comm}], c.tx_bytes, c.rx_bytes);
  } else {
    for (const Server& s : servers) {
      Totals& t = procs_[{s.pid, s.comm}];
      const bool alone = servers.size() == 1;
      charge(t, alone ? c.tx_bytes : s.s->app_tx_bytes, alone ? c.rx_bytes : s.s->app_rx_bytes);
      add(t.sends, s.s->sends);
      add(t.recvs, s.s->recvs);
    }
  }
  if (c.opener_pid && c.accepted_ns) add(procs_[{c.opener_pid, opener_comm}].accepted, 1);
  return rc;
}

void TcpReporter::collect(bool is_final, std::uint64_t ws, std::uint64_t we) {
  std::lock_guard lock(mu_);
  auto metric = [&](const char* name, const char* unit, double v, auto&& labels) {
    sdk::RecordBuilder rb(LOUPE_RECORD_METRIC, name);
    labels(rb);
    rb.final(is_final).window(ws, we).metric(LOUPE_METRIC_COUNTER, unit, v).emit(host_);
  };
  for (const auto& [key, t] : peers_) {
    const auto& [direction, remote, local_port] = key;
    auto labels = [&](sdk::RecordBuilder& rb) {
      rb.label("direction", direction).label("remote", remote);
      if (!local_port.empty()) rb.label("local_port", local_port);
    };
    metric("tcp_connections", "count", static_cast<double>(t.connections), labels);
    metric("tcp_failed_connects", "count", static_cast<double>(t.failed), labels);
    metric("tcp_tx_bytes", "bytes", static_cast<double>(t.tx), labels);
    metric("tcp_rx_bytes", "bytes", static_cast<double>(t.rx), labels);
    metric("tcp_retransmits", "count", static_cast<double>(t.retransmits), labels);
    metric("tcp_resets", "count", static_cast<double>(t.resets), labels);
    for (const auto& [name, h] :
         {std::pair<const char*, const loupe_hist*>{"tcp_connect_latency", &t.connect},
          {"tcp_accept_wait", &t.accept_wait},
          {"tcp_lifetime", &t.lifetime}}) {
      if (h->count == 0) continue;
      sdk::RecordBuilder rb(LOUPE_RECORD_HISTOGRAM, name);
      labels(rb);
      rb.final(is_final).window(ws, we);
      sdk::add_histogram(rb, "ns", *h).emit(host_);
    }
  }
  for (const auto& [key, t] : procs_) {
    auto labels = [&](sdk::RecordBuilder& rb) {
      rb.label("pid", std::to_string(key.first)).label("comm", key.second);
    };
    metric("tcp_process_connections", "count", static_cast<double>(t.connections), labels);
    metric("tcp_process_tx_bytes", "bytes", static_cast<double>(t.tx), labels);
    metric("tcp_process_rx_bytes", "bytes", static_cast<double>(t.rx), labels);
    if (t.sends || t.recvs) {
      metric("tcp_process_sends", "count", static_cast<double>(t.sends), labels);
      metric("tcp_process_recvs", "count", static_cast<double>(t.recvs), labels);
    }
    if (t.accepted)
      metric("tcp_process_accepted", "count", static_cast<double>(t.accepted), labels);
  }
  std::uint32_t zero = 0;
  const auto c = sdk::read_per_cpu_sum<tcp_counters>(counters_fd_, &zero);
  auto plain = [](sdk::RecordBuilder&) {};
  metric("tcp_state_changes", "count", static_cast<double>(c.state_changes), plain);
  metric("tcp_connections_closed", "count", static_cast<double>(c.closed), plain);
  metric("tcp_connections_other", "count", static_cast<double>(c.other), plain);
  const sdk::HealthRow rows[] = {
      {"tcp/conns_full", c.conns_full,
       "connections (of every process) not tracked: too many open at once (raise "
       "max_connections)"},
      {"tcp/conns_lost", c.lost_target,
       "the target's connections among them, counted at their end: not reported (raise "
       "max_connections)"},
      {"tcp/untracked_full", c.untracked_full,
       "untracked connections beyond twice max_connections: counted again at each state "
       "change and never told apart as the target's (raise max_connections)"},
      {"tcp/calls_unattributed", c.calls_unattributed,
       "sends/receives by more than 4 processes on one connection: in the connection's "
       "figures, in no process's (a fixed bound: TCP_MAX_SERVERS)"},
      {"tcp/peers_full", peers_full_,
       "connections counted under \"(over max_peers)\": too many peers (raise max_peers)"},
  };
  sdk::emit_health_rows(host_, "tcp", rows, is_final, ws, we);
}

}  // namespace loupe::tcp
