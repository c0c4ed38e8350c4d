// SPDX-License-Identifier: Apache-2.0
//
// tcp's records. Each closed connection of the target arrives on the ring (decode(), on a
// core worker thread) and leaves at once as an EVENT `tcp_connection`; it is also added to
// bounded tables that collect() (the session thread) reports:
//   per peer: outgoing connections by remote address:port, incoming by local port and
//     remote address — METRICs tcp_connections, tcp_failed_connects, tcp_tx_bytes,
//     tcp_rx_bytes, tcp_retransmits, tcp_resets; HISTOGRAMs tcp_connect_latency (ns,
//     outgoing), tcp_accept_wait (ns, incoming: established to accept()) and tcp_lifetime;
//   per process (pid, comm), charged to the processes that did the I/O, not to the one that
//     accepted it (a pre-fork server's listener): tcp_process_connections,
//     tcp_process_tx_bytes, tcp_process_rx_bytes, tcp_process_sends, tcp_process_recvs;
//     tcp_process_accepted to the acceptor.
// Reports are cumulative since the start.
#ifndef LOUPE_TCP_REPORTER_HPP
#define LOUPE_TCP_REPORTER_HPP

#include <cstdint>
#include <map>
#include <mutex>
#include <string>
#include <tuple>
#include <vector>

#include "loupe/hist.h"
#include "loupe/sdk/host.hpp"
#include "tcp.h"

namespace loupe::tcp {

// "10.0.0.1" / "::1" for the address of `family` in `bytes` (16 bytes, IPv4 in the first 4).
std::string address_text(std::uint16_t family, const std::uint8_t* bytes);

class TcpReporter {
 public:
  TcpReporter(const sdk::Host& host, int counters_fd, std::size_t max_peers);

  int decode(const void* data, std::uint32_t len);
  void collect(bool is_final, std::uint64_t window_start_ns, std::uint64_t window_end_ns);

 private:
  struct Totals {
    std::uint64_t connections = 0, failed = 0, tx = 0, rx = 0, retransmits = 0, resets = 0;
    std::uint64_t sends = 0, recvs = 0, accepted = 0;  // per process only
    loupe_hist connect{}, accept_wait{}, lifetime{};
  };
  // (direction, remote, local port): outgoing keep the remote port, incoming the local one.
  using PeerKey = std::tuple<std::string, std::string, std::string>;

  sdk::Host host_;
  int counters_fd_;
  std::size_t max_peers_;
  std::mutex mu_;
  std::map<PeerKey, Totals> peers_;
  std::map<std::pair<std::uint32_t, std::string>, Totals> procs_;
  std::uint64_t peers_full_ = 0;
};

}  // namespace loupe::tcp

#endif  // LOUPE_TCP_REPORTER_HPP
