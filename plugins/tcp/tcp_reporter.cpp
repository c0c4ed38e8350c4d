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
  const std::string comm(c.comm, strnlen(c.comm, TCP_COMM_LEN));
  const bool established = c.established_ns != 0;
  const bool failed = c.role == TCP_ROLE_ACTIVE && !established;
  const std::uint64_t resets = c.resets_sent + c.resets_received;
  const std::uint64_t lifetime = c.close_ns > c.birth_ns ? c.close_ns - c.birth_ns : 0;
  const std::uint64_t connect = c.established_ns && c.syn_ns ? c.established_ns - c.syn_ns : 0;
  // Accepted: how long the established connection waited in the listener's queue.
  const bool accepted = c.accepted_ns != 0 && c.established_ns != 0;
  const std::uint64_t accept_wait =
      accepted && c.accepted_ns > c.established_ns ? c.accepted_ns - c.established_ns : 0;

  sdk::RecordBuilder rb(LOUPE_RECORD_EVENT, "tcp_connection");
  rb.label("direction", role_name(c.role));
  rb.event_time(host_.now_ns(LOUPE_CLOCK_REALTIME))
      .field("pid", static_cast<std::int64_t>(c.pid))
      .field("comm", comm)
      .field("direction", std::string(role_name(c.role)))
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
  for (Totals* t : {&it->second, &procs_[{c.pid, comm}]}) {
    add(t->connections, 1);
    add(t->failed, failed ? 1 : 0);
    add(t->tx, c.tx_bytes);
    add(t->rx, c.rx_bytes);
    add(t->retransmits, c.retransmits);
    add(t->resets, resets);
    if (connect) sdk::hist_add(t->connect, connect);
    if (accepted) sdk::hist_add(t->accept_wait, accept_wait);
    sdk::hist_add(t->lifetime, lifetime);
  }
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
  }
  std::uint32_t zero = 0;
  const auto c = sdk::read_per_cpu_sum<tcp_counters>(counters_fd_, &zero);
  auto plain = [](sdk::RecordBuilder&) {};
  metric("tcp_state_changes", "count", static_cast<double>(c.state_changes), plain);
  metric("tcp_connections_closed", "count", static_cast<double>(c.closed), plain);
  metric("tcp_connections_other", "count", static_cast<double>(c.other), plain);
  const sdk::HealthRow rows[] = {
      {"tcp/conns_full", c.conns_full,
       "connections not tracked: too many open at once (raise max_connections)"},
      {"tcp/peers_full", peers_full_,
       "connections counted under \"(over max_peers)\": too many peers (raise max_peers)"},
  };
  sdk::emit_health_rows(host_, "tcp", rows, is_final, ws, we);
}

}  // namespace loupe::tcp
