// SPDX-License-Identifier: Apache-2.0
//
// tcp end to end through the CLI on the real kernel: a loopback client and server in one
// process make N connections with known bytes each way, one refused and one reset (and
// two over ::1 where the machine has IPv6 loopback); loupe must report each connection
// with exact bytes from both ends, the refused one as failed, the reset on both ends,
// and the totals per peer.
#include <gtest/gtest.h>

#include <cstdio>
#include <filesystem>
#include <map>
#include <nlohmann/json.hpp>
#include <regex>
#include <set>
#include <string>
#include <vector>

#include "cli_run.hpp"
#include "tcp_test_fields.hpp"

using nlohmann::json;

namespace {

using loupe::tcp::test::figure;
using loupe::tcp::test::u;
using loupe::test::RunResult;

constexpr int kConns = 10;

class TcpE2E : public loupe::test::CliRun {};

TEST_F(TcpE2E, EachConnectionWithExactBytesRefusedAndResetOnesAndPeerTotals) {
  RunResult r = run("[[plugins]]\nname = \"tcp\"\n", {TCP_WORKLOAD, std::to_string(kConns)});
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const long port = figure(r.output, "port");
  const long refused = figure(r.output, "refused_port");
  const long v6 = figure(r.output, "v6_port");
  ASSERT_GT(port, 0) << r.output;

  // Outgoing connection i sent (i+1)*1000 and received (i+1)*500; the server's side the
  // other way round. The last one to `port` was reset after 100 bytes.
  std::multiset<std::pair<std::uint64_t, std::uint64_t>> out, in, want_out, want_in;
  for (int i = 0; i < kConns; ++i) {
    want_out.insert({(i + 1) * 1000u, (i + 1) * 500u});
    want_in.insert({(i + 1) * 500u, (i + 1) * 1000u});
  }
  int failed = 0, reset_out = 0, reset_in = 0, v6_out = 0, with_connect_time = 0, accepted = 0,
      with_app = 0;
  std::uint64_t v6_tx = 0;
  for (const auto& rec : r.records) {
    if (rec.value("kind", "") != "event" || rec.value("name", "") != "tcp_connection") continue;
    const auto& f = rec["event"]["fields"];
    const std::string dir = f["direction"];
    const long rport = static_cast<long>(u(f, "remote_port"));
    const long lport = static_cast<long>(u(f, "local_port"));
    if (dir == "out" && rport == refused) {
      EXPECT_EQ(f["outcome"], "failed") << f.dump();
      ++failed;
      continue;
    }
    if (dir == "out" && rport == v6 && v6 > 0) {
      EXPECT_EQ(f["family"], "ipv6");
      EXPECT_EQ(f["remote"], "::1");
      v6_tx += u(f, "tx_bytes");
      ++v6_out;
      continue;
    }
    if (dir == "out" && rport == port) {
      EXPECT_EQ(f["remote"], "127.0.0.1");
      if (u(f, "resets_sent")) {
        EXPECT_EQ(f["outcome"], "reset");
        EXPECT_EQ(u(f, "tx_bytes"), 100u) << f.dump();
        ++reset_out;
        continue;
      }
      out.insert({u(f, "tx_bytes"), u(f, "rx_bytes")});
      if (f.contains("app_tx_bytes")) {
        ++with_app;
        EXPECT_EQ(u(f, "app_tx_bytes"), u(f, "tx_bytes")) << f.dump();
        EXPECT_EQ(u(f, "app_rx_bytes"), u(f, "rx_bytes")) << f.dump();
      }
      with_connect_time += u(f, "connect_ns") > 0;
    }
    if (dir == "in" && lport == port) {
      accepted += f.contains("accept_wait_ns");
      if (u(f, "resets_received")) {
        ++reset_in;
        continue;
      }
      in.insert({u(f, "tx_bytes"), u(f, "rx_bytes")});
    }
  }
  std::printf("  out %zu, in %zu, refused %d, reset out/in %d/%d, ::1 %d (%llu bytes sent)\n",
              out.size(), in.size(), failed, reset_out, reset_in, v6_out,
              static_cast<unsigned long long>(v6_tx));
  EXPECT_EQ(out, want_out);
  EXPECT_EQ(in, want_in);
  EXPECT_EQ(with_connect_time, kConns) << "every outgoing handshake timed";
  EXPECT_EQ(failed, 1);
  EXPECT_EQ(reset_out, 1);
  // The server's end of the reset connection: accept() in the server's context names its
  // owner before the RST arrives.
  EXPECT_EQ(reset_in, 1);
  // Application sizes from sock_*_length, else fexit on tcp_sendmsg/tcp_recvmsg: every
  // kernel of the matrix has one of them (6.18 the tracepoints, 6.1 fexit).
  std::printf("  application sizes on %d of %d outgoing connections\n", with_app, kConns);
  if (std::filesystem::exists("/sys/kernel/tracing/events/sock/sock_send_length") ||
      kernel_has("fexit"))
    EXPECT_EQ(with_app, kConns);
  else
    EXPECT_NE(r.output.find("application send/receive sizes are left out"), std::string::npos);
  EXPECT_EQ(accepted, kConns + 1) << "every accepted connection's wait in the listen queue";
  if (v6 > 0) {
    EXPECT_EQ(v6_out, 2);
    EXPECT_EQ(v6_tx, 4500u);
  }

  // Totals per peer: every outgoing connection to 127.0.0.1:port, with its bytes.
  const std::string peer = "127.0.0.1:" + std::to_string(port);
  double conns = -1, tx = -1;
  for (const json* m : r.all("metric", "tcp_connections"))
    if ((*m)["labels"].value("remote", "") == peer) conns = (*m)["metric"]["value"];
  for (const json* m : r.all("metric", "tcp_tx_bytes"))
    if ((*m)["labels"].value("remote", "") == peer) tx = (*m)["metric"]["value"];
  EXPECT_EQ(conns, kConns + 1);
  EXPECT_EQ(tx, 1000.0 * kConns * (kConns + 1) / 2 + 100);
  bool latency = false;
  for (const json* h : r.all("histogram", "tcp_connect_latency"))
    latency |=
        (*h)["labels"].value("remote", "") == peer && (*h)["histogram"]["count"] == kConns + 1;
  EXPECT_TRUE(latency) << "a connect latency histogram for " << peer;
}

// accept() seen by every hook this kernel offers (the running kernel's answer, `loupe
// check --json`): each accepted connection has its wait and its owner, whichever hook saw
// it; a hook the kernel lacks is refused with the reason, never silently replaced.
TEST_F(TcpE2E, AcceptWaitThroughEveryHookTheKernelHas) {
  for (const auto& [hook, feature] : {std::pair<const char*, const char*>{"fexit", "fexit"},
                                      {"kprobe", "kretprobe"},
                                      {"tracepoint", "tracepoint"}}) {
    SCOPED_TRACE(hook);
    RunResult r = run(std::string("[[plugins]]\nname = \"tcp\"\naccept_hook = \"") + hook + "\"\n",
                      {TCP_WORKLOAD, "5"});
    if (!kernel_has(feature)) {
      EXPECT_NE(r.exit_code, 0) << r.output;
      EXPECT_NE(r.output.find(std::string("accept_hook = \"") + hook + "\""), std::string::npos)
          << r.output;
      std::printf("  %s: refused here, as the preflight says\n", hook);
      continue;
    }
    ASSERT_EQ(r.exit_code, 0) << r.output;
    const long port = figure(r.output, "port");
    int in = 0, waited = 0;
    for (const auto& rec : r.records) {
      if (rec.value("kind", "") != "event" || rec.value("name", "") != "tcp_connection") continue;
      const auto& f = rec["event"]["fields"];
      if (f["direction"] != "in" || static_cast<long>(u(f, "local_port")) != port) continue;
      ++in;
      waited += f.contains("accept_wait_ns");
    }
    std::printf("  %s: %d accepted connections, %d with their accept wait\n", hook, in, waited);
    EXPECT_EQ(in, 6);  // 5 and the reset one
    EXPECT_EQ(waited, in);
  }
}

TEST_F(TcpE2E, OtherProcessesConnectionsAreLeftOut) {
  // The session's target is `true`: the workload running beside it is not reported.
  const std::string loop =
      std::string("for i in $(seq 20); do ") + TCP_WORKLOAD + " 5 >/dev/null; sleep 0.1; done";
  std::FILE* p = popen(("sh -c '" + loop + "' >/dev/null 2>&1 &").c_str(), "r");
  RunResult r = run("[[plugins]]\nname = \"tcp\"\n", {"sleep", "1.5"});
  if (p) pclose(p);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  int events = 0;
  for (const auto& rec : r.records)
    events += rec.value("kind", "") == "event" && rec.value("name", "") == "tcp_connection";
  double other = 0;
  for (const json* m : r.all("metric", "tcp_connections_other")) other = (*m)["metric"]["value"];
  std::printf("  events %d; other processes' connections seen and left out: %.0f\n", events, other);
  EXPECT_EQ(events, 0);
  EXPECT_GT(other, 0) << "the workload beside the target made connections meanwhile";
}

}  // namespace
