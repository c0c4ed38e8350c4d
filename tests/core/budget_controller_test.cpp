// SPDX-License-Identifier: Apache-2.0
//
// The budget controller's rules, fed the counts a kernel would give: over the budget the
// costliest profiler that can be thinned is thinned, as far as its cost per event says; a change is
// followed by ticks that only measure; well under for a while gives events back; a
// profiler that refuses is not asked again; loupe's own threads being the cost thins
// nothing. The real thinning (a BPF program keeping 1 in N, the counts scaled) is tested
// end to end in tests/session/agent_e2e_test.cpp.
#include "session/budget_controller.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <string>
#include <vector>

namespace loupe {
namespace {

constexpr std::uint64_t kSecond = 1000000000ull;

struct Rig {
  std::vector<std::string> thinnable{"cpusample", "offcpu"};
  std::map<std::string, std::uint32_t> set;  // last divisor each was given
  std::vector<std::string> refuse;
  std::vector<std::string> events;  // "instance old->new"
  std::map<std::string, double> gauges;
  BudgetController ctl;
  std::uint64_t mono = 0, self = 0;
  std::map<std::string, std::uint64_t> run_ns, run_cnt;  // cumulative, by instance

  explicit Rig(double budget)
      : ctl(
            budget, 2,
            [this](const loupe_record& r) {
              if (r.kind == LOUPE_RECORD_EVENT) {
                std::string instance, from, to;
                for (std::uint32_t i = 0; i < r.event->n_fields; ++i) {
                  const auto& f = r.event->fields[i];
                  std::string key = f.key;
                  if (key == "instance") instance = f.v.str;
                  if (key == "old_divisor") from = std::to_string(f.v.u64);
                  if (key == "new_divisor") to = std::to_string(f.v.u64);
                }
                events.push_back(instance + " " + from + "->" + to);
              } else if (r.kind == LOUPE_RECORD_METRIC) {
                gauges[r.labels[0].value] = r.metric->value;
              }
            },
            BudgetController::Knobs{
                [this] {
                  std::vector<std::string> out;
                  for (const auto& t : thinnable)
                    if (std::find(refuse.begin(), refuse.end(), t) == refuse.end() || !set.count(t))
                      out.push_back(t);
                  return out;
                },
                [this](const std::string& instance, std::uint32_t divisor, std::string* why) {
                  if (std::find(refuse.begin(), refuse.end(), instance) != refuse.end()) {
                    *why = "not in this mode";
                    set[instance] = 0;
                    return false;
                  }
                  set[instance] = divisor;
                  return true;
                }}) {}

  // One second in which each instance's programs ran `bpf` ns and loupe's threads `threads`.
  // `events`: how many times each ran (none given: the counts carry no runs).
  void second(std::map<std::string, std::uint64_t> bpf, std::uint64_t threads,
              std::map<std::string, std::uint64_t> events = {}) {
    mono += kSecond;
    self += threads;
    std::vector<ProgramStats> now;
    std::uint32_t id = 10;
    for (const char* instance : {"cpusample", "offcpu"}) {
      run_ns[instance] += bpf[instance];
      run_cnt[instance] += events[instance];
      ProgramStats s;
      s.run_cnt = run_cnt[instance];
      s.instance = instance;
      s.prog_id = id++;
      s.run_time_ns = run_ns[instance];
      now.push_back(s);
    }
    ctl.tick(now, mono, self, mono);
  }
};

// 1% of 2 CPUs is 20 ms a second.
constexpr std::uint64_t kMs = 1000000ull;

TEST(BudgetController, OverTheBudgetTheCostliestProfilerIsThinnedAndTheNextTicksOnlyMeasure) {
  Rig rig(1.0);
  rig.second({}, 0);                                                    // baseline
  rig.second({{"cpusample", 2 * kMs}, {"offcpu", 30 * kMs}}, 2 * kMs);  // 1.7%: under 2x
  ASSERT_EQ(rig.events, std::vector<std::string>{"offcpu 1->2"});
  EXPECT_EQ(rig.set["offcpu"], 2u);
  EXPECT_EQ(rig.ctl.divisor("offcpu"), 2u);
  // Still over, but these ticks hold time at the old rate: nothing changes.
  for (int i = 0; i < BudgetController::kSettleTicks; ++i)
    rig.second({{"offcpu", 30 * kMs}}, 2 * kMs);
  EXPECT_EQ(rig.events.size(), 1u);
  rig.second({{"offcpu", 30 * kMs}}, 2 * kMs);
  EXPECT_EQ(rig.events.back(), "offcpu 2->4");
}

TEST(BudgetController, FarOverTheBudgetTheDivisorJumps) {
  Rig rig(1.0);
  rig.second({}, 0);
  rig.second({{"offcpu", 100 * kMs}}, 0);  // 5% against 1%
  EXPECT_EQ(rig.events, std::vector<std::string>{"offcpu 1->8"});
}

TEST(BudgetController, WellUnderTheBudgetForAWhileEventsComeBack) {
  Rig rig(1.0);
  rig.second({}, 0);
  rig.second({{"offcpu", 100 * kMs}}, 0);
  for (int i = 0; i < BudgetController::kSettleTicks; ++i) rig.second({{"offcpu", 5 * kMs}}, 0);
  // Under half the budget, but not yet for kCalmTicks ticks.
  for (int i = 0; i < BudgetController::kCalmTicks - 1; ++i) rig.second({{"offcpu", 5 * kMs}}, 0);
  EXPECT_EQ(rig.events.size(), 1u);
  rig.second({{"offcpu", 5 * kMs}}, 0);
  EXPECT_EQ(rig.events.back(), "offcpu 8->4");
  // Between half the budget and the budget: left as it is.
  for (int i = 0; i < 20; ++i) rig.second({{"offcpu", 15 * kMs}}, 0);
  EXPECT_EQ(rig.events.size(), 2u);
  EXPECT_NE(rig.ctl.summary().find("offcpu kept 1 in 8 events at most (4 now; raised 1, lowered 1"),
            std::string::npos)
      << rig.ctl.summary();
  rig.ctl.report(false);
  EXPECT_EQ(rig.gauges["offcpu"], 4);
  EXPECT_EQ(rig.gauges["cpusample"], 1);
}

TEST(BudgetController, ItsOwnThreadsBeingTheCostThinsNothing) {
  Rig rig(1.0);
  rig.second({}, 0);
  for (int i = 0; i < 5; ++i) rig.second({{"offcpu", 1 * kMs}}, 60 * kMs);
  EXPECT_TRUE(rig.events.empty());
  EXPECT_TRUE(rig.ctl.summary().empty());
}

// Just over the budget, a profiler whose programs take a fiftieth of it (a 19 Hz sampler
// beside a busy offcpu) is left exact; the one that costs is thinned.
TEST(BudgetController, AProfilerFarUnderTheBudgetKeepsItsPrecision) {
  Rig rig(1.0);
  rig.second({}, 0);
  for (int i = 0; i < 5; ++i) rig.second({{"cpusample", 400000}}, 20 * kMs);
  EXPECT_TRUE(rig.events.empty());
  rig.second({{"cpusample", 400000}, {"offcpu", 6 * kMs}}, 15 * kMs);
  EXPECT_EQ(rig.events, std::vector<std::string>{"offcpu 1->2"});
}

TEST(BudgetController, AProfilerThatRefusesIsNotAskedAgainAndTheNextIs) {
  Rig rig(1.0);
  rig.refuse = {"offcpu"};
  rig.second({}, 0);
  rig.second({{"cpusample", 10 * kMs}, {"offcpu", 30 * kMs}}, 0);
  EXPECT_TRUE(rig.events.empty());
  EXPECT_EQ(rig.set["offcpu"], 0u);  // asked once
  EXPECT_NE(rig.ctl.summary().find("offcpu refused to be thinned (not in this mode)"),
            std::string::npos);
  // cpusample's 10 ms alone cannot take off the 20 over: the largest step.
  rig.second({{"cpusample", 10 * kMs}, {"offcpu", 30 * kMs}}, 0);
  EXPECT_EQ(rig.events, std::vector<std::string>{"cpusample 1->8"});
}

// A million events a second at e + f / N ns each: e = 20 the bare entry, f = 12 what
// thinning removes. From 1 in 2 (26 ns) the next step, to 1 in 4, takes 3 ns off, over a
// tenth: taken. From 1 in 4 (23 ns), 1 in 8 would take 1.5 off: not taken, and said.
TEST(BudgetController, ThinningStopsWhereItNoLongerLowersTheCostOfAnEvent) {
  Rig rig(1.0);
  rig.thinnable = {"offcpu"};
  const std::uint64_t n = 1000000;
  auto at = [&](std::uint64_t ns_per_event, int ticks) {
    for (int i = 0; i < ticks; ++i) rig.second({{"offcpu", ns_per_event * n}}, 0, {{"offcpu", n}});
  };
  rig.second({}, 0);
  at(32, 1);  // 1.6%: 1 -> 2
  ASSERT_EQ(rig.events.back(), "offcpu 1->2");
  at(26, BudgetController::kSettleTicks + 1);
  ASSERT_EQ(rig.events.back(), "offcpu 2->4");
  at(23, BudgetController::kSettleTicks + 10);
  EXPECT_EQ(rig.events.size(), 2u) << "1 in 8 would save 1.5 of 23 ns";
  EXPECT_EQ(rig.ctl.divisor("offcpu"), 4u);
  EXPECT_NE(rig.ctl.summary().find("not thinned further: its programs still cost 23 ns an event"),
            std::string::npos)
      << rig.ctl.summary();
}

// A million events a second at e + f / N ns each, e = 10 and f = 50, against a budget of
// 0.5% (10 ms a second of 2 CPUs). 60 ms at first: one step to where f alone would fit,
// 1 in 8 (16.25 ns). There e and f are known, e alone is over what fits, so the next step
// goes to where a doubling takes less than a tenth off (4f / e = 20: 1 in 32), and no
// further: two changes, where doubling would have taken four.
TEST(BudgetController, TheDivisorGoesWhereTheCostPerEventSaysInAStepOrTwo) {
  Rig rig(0.5);
  rig.thinnable = {"offcpu"};
  const std::uint64_t n = 1000000;
  auto at = [&](std::uint32_t divisor, int ticks) {
    const auto ns = static_cast<std::uint64_t>((10.0 + 50.0 / divisor) * n);
    for (int i = 0; i < ticks; ++i) rig.second({{"offcpu", ns}}, 1 * kMs, {{"offcpu", n}});
  };
  rig.second({}, 0);
  at(1, 1);
  ASSERT_EQ(rig.events, std::vector<std::string>{"offcpu 1->8"});
  at(8, BudgetController::kSettleTicks + 1);
  ASSERT_EQ(rig.events.back(), "offcpu 8->32");
  at(32, BudgetController::kSettleTicks + 10);
  EXPECT_EQ(rig.events.size(), 2u);
  EXPECT_NE(rig.ctl.summary().find("not thinned further"), std::string::npos) << rig.ctl.summary();
}

TEST(BudgetController, ThinningStopsAtTheLargestDivisor) {
  Rig rig(0.001);
  rig.thinnable = {"offcpu"};
  rig.second({}, 0);
  for (int i = 0; i < 40; ++i) rig.second({{"offcpu", 10 * kMs}}, 0);
  EXPECT_EQ(rig.ctl.divisor("offcpu"), BudgetController::kMaxDivisor);
  EXPECT_EQ(rig.events.back(), "offcpu 512->1024");
}

}  // namespace
}  // namespace loupe
