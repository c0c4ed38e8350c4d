// SPDX-License-Identifier: Apache-2.0
//
// The findings rules on records built here (the e2e test runs them on real profiles): a
// flat profile's hot spot is said, and a record with too little behind it says nothing.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "loupe/report/findings_rules.hpp"
#include "loupe/report/health_share.hpp"
#include "sample_records.hpp"

namespace {

using loupe::report::FindingsRules;
using loupe::test::SampleRecord;

bool says(const std::vector<std::string>& said, const std::string& what) {
  for (const auto& s : said)
    if (s.find(what) != std::string::npos) return true;
  return false;
}

// A CPU stack record of `samples` whose leaf is `leaf` under main (gzip's shape: named by
// their functions' starts, as Debian's unsymbolized binaries are).
void cpu_sample(FindingsRules& rules, const char* leaf, const char* mid, std::int64_t samples) {
  loupe_frame f[3] = {
      {0x4712, leaf, "/usr/bin/gzip", 2, LOUPE_FRAME_USER, LOUPE_RESOLVED_EH_FRAME},
      {0x5000, mid, "/usr/bin/gzip", 9, LOUPE_FRAME_USER, LOUPE_RESOLVED_EH_FRAME},
      {0x3000, "main", "/usr/bin/gzip", 1, LOUPE_FRAME_USER, LOUPE_RESOLVED_SYMTAB}};
  SampleRecord r(LOUPE_RECORD_STACK_SAMPLE, "cpu");
  r.builder().frames(f, 3).value("samples", "count", samples);
  rules.add(r.record(true, "cpusample"));
}

TEST(FindingsRules, AFlatProfilesHotSpotIsSaidWithItsShare) {
  // One function holds a third of the samples by itself, spread under three callers of
  // which none holds half: no dominant function below main, but a hot spot.
  FindingsRules rules;
  cpu_sample(rules, "gzip [fn@0x4710]", "gzip [fn@0x5000]", 11);
  cpu_sample(rules, "gzip [fn@0x4710]", "gzip [fn@0x6000]", 11);
  cpu_sample(rules, "gzip [fn@0x4710]", "gzip [fn@0x7000]", 11);
  cpu_sample(rules, "gzip [fn@0x4290]", "gzip [fn@0x5000]", 20);
  cpu_sample(rules, "gzip [fn@0x4400]", "gzip [fn@0x6000]", 20);
  cpu_sample(rules, "gzip [fn@0x4500]", "gzip [fn@0x7000]", 27);
  const auto said = rules.statements();
  EXPECT_TRUE(says(said,
                   "hot spot: 33 % of cpusample/cpu samples (33 of 100) are in gzip "
                   "[fn@0x4710] itself"))
      << ::testing::PrintToString(said);
}

TEST(FindingsRules, ARecordOfOneCountSaysNothing) {
  // "100 % of runq_blockers waits (1 of 1)" was said of a single wait.
  FindingsRules rules;
  cpu_sample(rules, "gzip [fn@0x4710]", "gzip [fn@0x5000]", 1);
  EXPECT_TRUE(rules.statements().empty()) << ::testing::PrintToString(rules.statements());
}

TEST(FindingsRules, ALeafThatIsTheDominantFunctionIsSaidOnce) {
  FindingsRules rules;
  cpu_sample(rules, "spin", "work", 90);
  cpu_sample(rules, "other", "work", 10);
  const auto said = rules.statements();
  EXPECT_TRUE(says(said, "dominant function: 90 % of cpusample/cpu samples")) << said.size();
  EXPECT_FALSE(says(said, "hot spot")) << ::testing::PrintToString(said);
}

// A loss reads as a part of its whole, with two digits however small: 17 of 52,110 is not
// "0.0%", and the console's verdict and the findings write it alike.
TEST(HealthShare, APartOfItsWholeKeepsTwoDigitsHoweverSmall) {
  using loupe::report::health_share;
  EXPECT_EQ(health_share(3, 196, "stacks"), "3 of 196 stacks (1.5%)");
  EXPECT_EQ(health_share(17, 52110, "records"), "17 of 52,110 records (0.033%)");
  EXPECT_EQ(health_share(2268, 2565, ""), "2,268 of 2,565 (88%)");
  EXPECT_EQ(health_share(1234567, 1234567, "samples"), "1,234,567 of 1,234,567 samples (100%)");
}

}  // namespace
