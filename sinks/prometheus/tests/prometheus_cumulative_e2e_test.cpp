// SPDX-License-Identifier: Apache-2.0
//
// Counters and histograms as Prometheus reads them through a session with interval reports:
// `loupe run` with `interval` times clock_nanosleep (latency plugin) and counts syscalls
// (syscount) of a workload that sleeps a known number of times, fast then slow; the
// prometheus sink serves them, and a real Prometheus scrapes every 200 ms across several
// intervals. The latency plugin's interval histograms are the interval's increments and its
// counters running totals; on the endpoint both must only grow (resets() = 0), end at the
// workload's own count, and rate() and histogram_quantile() over them must agree with the
// workload. Before any report the endpoint already serves loupe's own series. Root and the
// prometheus package.
#include <gtest/gtest.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>

#include "cli_run.hpp"
#include "prometheus_server.hpp"

namespace {

using loupe::test::free_port;
using loupe::test::PrometheusServer;
using loupe::test::value_of;
using nlohmann::json;

class PrometheusCumulativeE2E : public loupe::test::CliRun {};

// A fast phase, then a slow one: an interval of the second holds far fewer calls than one
// of the first, so a histogram served per interval would drop between them.
constexpr int kRounds = 75;  // fast phase, each round: 19 sleeps of 0.2 ms, 1 of 8 ms
constexpr int kSlow = 200;   // slow phase: sleeps of 5 ms
constexpr int kSleeps = kRounds * 20 + kSlow;

TEST_F(PrometheusCumulativeE2E, RateAndQuantilesOverIntervalReportsSeeNoCounterReset) {
  if (std::system("command -v prometheus >/dev/null 2>&1") != 0)
    GTEST_SKIP() << "prometheus (package prometheus) not installed";
  if (std::system("command -v python3 >/dev/null 2>&1") != 0) GTEST_SKIP() << "no python3";
  const int port = free_port();
  PrometheusServer prom(dir_, port, "", {}, "200ms");
  // Scraping before loupe listens: the first scrape that succeeds is then loupe's first.
  json up =
      prom.wait_for(R"(up{job="loupe"})", [](const json& r) { return r.is_array() && !r.empty(); },
                    std::chrono::seconds(30));
  ASSERT_TRUE(up.is_array() && !up.empty()) << "Prometheus did not start\n" << prom.log();

  const std::string body =
      "[[plugins]]\nname = \"latency\"\n[[plugins.targets]]\nname = \"sleep\"\n"
      "syscall = \"clock_nanosleep\"\n"
      "[[plugins]]\nname = \"syscount\"\ntop = 0\n"
      "[[sinks]]\nname = \"prometheus\"\nlisten = \"127.0.0.1:" +
      std::to_string(port) + "\"\nlinger = 3\n";
  const std::string workload = "'import time\nfor _ in range(" + std::to_string(kRounds) +
                               "):\n    for d in [0.0002] * 19 + [0.008]: time.sleep(d)\n"
                               "for _ in range(" +
                               std::to_string(kSlow) + "): time.sleep(0.005)'";
  loupe::test::RunResult run =
      CliRun::run(body, {"python3", "-c", workload}, "", "interval = 0.7\n");
  ASSERT_EQ(run.exit_code, 0) << run.output;

  // The session and its lingering are over: every scrape Prometheus will have is stored.
  const std::string sleep = R"({job="loupe",target="sleep"})";
  const std::string count = "loupe_latency_seconds_count" + sleep;
  json last = prom.wait_for(
      "max_over_time(" + count + "[2m])",
      [](const json& r) { return r.is_array() && !r.empty() && value_of(r) >= kSleeps; },
      std::chrono::seconds(10));
  ASSERT_TRUE(last.is_array() && !last.empty()) << "no histogram scraped\n" << prom.log();
  const double at = last[0]["value"][0].get<double>();
  auto query = [&](const std::string& promql) {
    json r = prom.query(promql, at);
    EXPECT_TRUE(r.is_array() && !r.empty()) << promql << " -> " << r.dump();
    return r.is_array() && !r.empty() ? value_of(r) : -1.0;
  };

  // The workload's own count, in jsonl and on the endpoint at the end.
  const json* hist = nullptr;
  for (const json* r : run.all("histogram", "latency"))
    if ((*r)["labels"].value("target", "") == "sleep") hist = r;
  ASSERT_NE(hist, nullptr) << run.output;
  ASSERT_EQ((*hist)["histogram"]["count"].get<int>(), kSleeps) << run.output;
  EXPECT_EQ(value_of(last), kSleeps);
  EXPECT_EQ(query("max_over_time(loupe_calls_total" + sleep + "[2m])"), kSleeps);

  // Several reports were scraped while the workload ran, the first one before any report.
  const double samples = query("count_over_time(" + count + "[2m])");
  const double first = query("min_over_time(" + count + "[2m])");
  std::printf("  %g scrapes of the histogram, from count %g to %d\n", samples, first, kSleeps);
  EXPECT_GE(query("max_over_time(loupe_reports_total[2m])"), 3) << "3 or more reports served";
  EXPECT_EQ(query("min_over_time(loupe_reports_total[2m])"), 0)
      << "loupe's own series are served before the first report";
  EXPECT_LT(first, kSleeps) << "the histogram moved between scrapes";

  // Cumulative: no series ever went back, histogram or counter.
  for (const std::string& series :
       {count, "loupe_latency_seconds_bucket" + sleep, "loupe_calls_total" + sleep,
        std::string("loupe_syscalls_total")}) {
    const double resets = query("sum(resets(" + series + "[2m]))");
    std::printf("  resets of %s: %g\n", series.c_str(), resets);
    EXPECT_EQ(resets, 0) << series;
  }

  // rate() over the run is the increase it saw, per second of its window: between what
  // the samples rose by and that plus Prometheus' extrapolation at the edges.
  const double rate = query("rate(" + count + "[1m])") * 60;
  EXPECT_GE(rate, (kSleeps - first) * 0.999);
  EXPECT_LE(rate, (kSleeps - first) * 1.5 + 1);

  // 1,425 sleeps of 0.2 ms, 275 of 5 or 8 ms: p99 lies among the long ones (the classic
  // bucket holding 5 and 8 ms starts at 4.19 ms), never above loupe's own maximum's bucket.
  // The median is the machine's business (a 0.2 ms sleep took 4.7 ms on a loaded emulated
  // guest): it is held to loupe's own, within a bucket either way, as rate() over the window
  // leaves out what was counted before the first scrape (199 of 1,700 calls once).
  const json& h = (*hist)["histogram"];
  const double max_s = h["max"].get<double>() / 1e9;
  const double p99 =
      query("histogram_quantile(0.99, rate(loupe_latency_seconds_bucket" + sleep + "[1m]))");
  const double p50 =
      query("histogram_quantile(0.5, rate(loupe_latency_seconds_bucket" + sleep + "[1m]))");
  std::uint64_t v = 0, upper = 0, below = 0, prev_top = 0;
  for (const auto& p : h["percentiles"])
    if (p["q"].get<double>() == 0.5) v = p["value"].get<std::uint64_t>();
  for (const auto& b : h["buckets"]) {
    const auto lo = b["lower"].get<std::uint64_t>(), up = b["upper"].get<std::uint64_t>();
    if (lo <= v && v < up) upper = up, below = prev_top;
    prev_top = up - 1;
  }
  ASSERT_GT(upper, 0u) << h.dump();
  std::printf("  p50 %.3g s (loupe %.3g s in (%.3g, %.3g]), p99 %.3g s (loupe's max %.3g s)\n", p50,
              v / 1e9, below / 1e9, (upper - 1) / 1e9, p99, max_s);
  EXPECT_GE(p99, 0.004194304);
  EXPECT_LE(p99, 2 * max_s);
  EXPECT_GT(p50 * 1e9, static_cast<double>(below) / 2);
  EXPECT_LE(p50 * 1e9, static_cast<double>(upper - 1) * 2);

  // The syscall total has a name of its own: summing the per-syscall series counts each
  // syscall once, never the total beside its parts.
  const double all = query("max_over_time(loupe_all_syscalls_total[2m])");
  const double sum = query("sum(max_over_time(loupe_syscalls_total[2m]))");
  EXPECT_GE(all, kSleeps);
  EXPECT_EQ(sum, all) << "top = 0: every syscall has its row, and only its row";
}

}  // namespace
