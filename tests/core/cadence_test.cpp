// SPDX-License-Identifier: Apache-2.0
//
// The session's clocks (session/cadence.hpp), on a fixed start: no sleeping, no wall clock.
#include "session/cadence.hpp"

#include <gtest/gtest.h>

using loupe::Cadence;
using namespace std::chrono_literals;

namespace {
const Cadence::Clock::time_point t0{std::chrono::hours(1)};
}

TEST(Cadence, EachDutyIsDueOnItsOwnGridAndTheLoopWakesForTheEarliest) {
  Cadence c(t0);
  const auto report = c.every(5s, 5s);
  const auto budget = c.every(1s, 0s);
  EXPECT_EQ(c.next(), t0);
  auto due = c.due(t0);
  EXPECT_TRUE(Cadence::has(due, budget));
  EXPECT_FALSE(Cadence::has(due, report));
  EXPECT_EQ(c.next(), t0 + 1s);
  for (int s = 1; s <= 4; ++s) {
    due = c.due(t0 + std::chrono::seconds(s));
    EXPECT_TRUE(Cadence::has(due, budget)) << s;
    EXPECT_FALSE(Cadence::has(due, report)) << s;
  }
  due = c.due(t0 + 5s);
  EXPECT_TRUE(Cadence::has(due, budget));
  EXPECT_TRUE(Cadence::has(due, report));
  EXPECT_EQ(c.next(), t0 + 6s);
}

TEST(Cadence, ADutyThatFellBehindRunsOnceAndKeepsItsTimes) {
  Cadence c(t0);
  const auto report = c.every(5s, 5s);
  // A report that took 12 s: due once at 17 s, next at 20 s (its grid), not at 22 s.
  auto due = c.due(t0 + 17s);
  EXPECT_TRUE(Cadence::has(due, report));
  EXPECT_EQ(c.next(), t0 + 20s);
  EXPECT_EQ(c.due(t0 + 19s), 0u);
  EXPECT_TRUE(Cadence::has(c.due(t0 + 20s), report));
}

TEST(Cadence, APeriodOfZeroIsNeverDue) {
  Cadence c(t0);
  const auto never = c.every(0s, 0s);
  const auto rotate = c.every(60s, 60s);
  EXPECT_FALSE(Cadence::has(c.due(t0 + 24h), never));
  EXPECT_EQ(c.next(), t0 + 24h + 60s);  // rotate, due at 24 h, is on its grid again
  (void)rotate;
  Cadence none(t0);
  EXPECT_EQ(none.next(), Cadence::Clock::time_point::max());
  none.every(-1s, 0s);
  EXPECT_EQ(none.next(), Cadence::Clock::time_point::max());
}
