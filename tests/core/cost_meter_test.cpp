// SPDX-License-Identifier: Apache-2.0
//
// loupe's own cost over a window (session/cost_meter.hpp), the one meter of the reports'
// cost rows and the budget's ticks, on counts given to it.
#include "session/cost_meter.hpp"

#include <gtest/gtest.h>

using loupe::CostMeter;
using loupe::ProgramStats;

namespace {

ProgramStats prog(const char* instance, const char* probe, std::uint32_t id, std::uint64_t runs,
                  std::uint64_t ns) {
  ProgramStats s;
  s.instance = instance;
  s.probe = probe;
  s.prog_id = id;
  s.run_cnt = runs;
  s.run_time_ns = ns;
  return s;
}

constexpr std::uint64_t kSecond = 1'000'000'000;

}  // namespace

TEST(CostMeter, AProgramOfSeveralProbesIsCountedOnceAndEachWindowFromTheLast) {
  CostMeter m(/*online_cpus=*/2);
  m.start(10 * kSecond, 1'000);
  // Two probes of one program (a cookie per target): one set of counts.
  auto w =
      m.measure({prog("latency", "enter", 7, 100, 5'000), prog("latency", "enter2", 7, 100, 5'000),
                 prog("cpusample", "cpu", 9, 10, 20'000'000)},
                11 * kSecond, 1'000 + 10'000'000);
  EXPECT_DOUBLE_EQ(w.seconds, 1.0);
  EXPECT_EQ(w.by_program.size(), 2u);
  EXPECT_EQ(w.by_instance.at("latency").runs, 100u);
  EXPECT_EQ(w.by_instance.at("latency").ns, 5'000u);
  EXPECT_DOUBLE_EQ(w.ns_per_event("latency"), 50.0);
  EXPECT_DOUBLE_EQ(w.self_ns, 10'000'000.0);
  // Of 2 CPUs for 1 s: (5 us + 20 ms + 10 ms) / 2 s.
  EXPECT_NEAR(w.total_percent(), 100.0 * (5e3 + 20e6 + 10e6) / 2e9, 1e-9);

  // The next window holds only what came since.
  w = m.measure(
      {prog("latency", "enter", 7, 150, 6'000), prog("cpusample", "cpu", 9, 10, 20'000'000)},
      13 * kSecond, 1'000 + 10'000'000);
  EXPECT_DOUBLE_EQ(w.seconds, 2.0);
  EXPECT_EQ(w.by_instance.at("latency").runs, 50u);
  EXPECT_EQ(w.by_instance.at("latency").ns, 1'000u);
  EXPECT_EQ(w.instance_ns("cpusample"), 0.0);
  EXPECT_EQ(w.self_ns, 0.0);
  EXPECT_EQ(w.ns_per_event("nosuch"), 0.0);

  // The whole session, from the start (the programs from their load).
  w = m.measure({prog("latency", "enter", 7, 160, 7'000)}, 14 * kSecond, 2'000 + 10'000'000,
                /*whole=*/true);
  EXPECT_DOUBLE_EQ(w.seconds, 4.0);
  EXPECT_EQ(w.by_instance.at("latency").runs, 160u);
  EXPECT_DOUBLE_EQ(w.self_ns, 10'001'000.0);
}

TEST(CostMeter, ABaselineOfCountsLeavesOutWhatCameBeforeIt) {
  CostMeter m(1);
  EXPECT_FALSE(m.started());
  m.start(5 * kSecond, 0, {prog("offcpu", "switch", 3, 1'000, 900'000)});
  EXPECT_TRUE(m.started());
  auto w = m.measure({prog("offcpu", "switch", 3, 1'100, 1'000'000)}, 6 * kSecond, 0);
  EXPECT_EQ(w.by_instance.at("offcpu").runs, 100u);
  EXPECT_DOUBLE_EQ(w.ns_per_event("offcpu"), 1'000.0);
  EXPECT_NEAR(w.total_percent(), 0.01, 1e-12);  // 100 us of 1 s on one CPU
}

TEST(CostMeter, AnEmptyWindowCostsNothingAndCountersThatWentBackDoNotWrap) {
  CostMeter m(4);
  m.start(kSecond, 500);
  auto w = m.measure({prog("x", "p", 1, 10, 10)}, kSecond, 400);  // same instant, a lower self
  EXPECT_EQ(w.seconds, 0.0);
  EXPECT_EQ(w.total_percent(), 0.0);
  EXPECT_EQ(w.self_ns, 0.0);
  // A program reloaded under the same id counts lower than before: no wrap to 2^64.
  w = m.measure({prog("x", "p", 1, 5, 5)}, 2 * kSecond, 400);
  EXPECT_EQ(w.by_instance.at("x").runs, 0u);
  EXPECT_EQ(w.by_instance.at("x").ns, 0u);
}
