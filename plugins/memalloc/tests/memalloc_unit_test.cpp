// SPDX-License-Identifier: Apache-2.0
//
// Unit tests of the memalloc helpers that need no kernel: sampling scaling and the site
// table that joins per-site totals with live allocations.
#include <gtest/gtest.h>

#include <cmath>
#include <numeric>

#include "sample_scaling.hpp"
#include "site_table.hpp"

using loupe::memalloc::SampleScaling;
using loupe::memalloc::SiteRow;
using loupe::memalloc::SiteTable;

TEST(SampleScaling, AllIsExact) {
  auto s = SampleScaling::all();
  EXPECT_TRUE(s.exact());
  auto e = s.scale(7, 700);
  EXPECT_EQ(e.count, 7u);
  EXPECT_EQ(e.bytes, 700u);
  EXPECT_EQ(s.describe(), "all");
  EXPECT_TRUE(SampleScaling::one_in(1).exact());
}

TEST(SampleScaling, OneInNMultiplies) {
  auto s = SampleScaling::one_in(8);
  auto e = s.scale(5, 320);
  EXPECT_EQ(e.count, 40u);
  EXPECT_EQ(e.bytes, 2560u);
  EXPECT_EQ(s.describe(), "1-in-8");
  EXPECT_THROW(SampleScaling::one_in(0), std::invalid_argument);
}

TEST(SampleScaling, PoissonDividesByTheSampleProbabilityOfTheAverageSize) {
  auto s = SampleScaling::poisson(1024);
  // 64-byte allocations are sampled with p = 1 - exp(-1/16).
  double p = 1 - std::exp(-64.0 / 1024.0);
  auto e = s.scale(100, 6400);
  EXPECT_EQ(e.count, static_cast<std::uint64_t>(std::llround(100 / p)));
  EXPECT_EQ(e.bytes, static_cast<std::uint64_t>(std::llround(6400 / p)));
  // Allocations far larger than the mean are always sampled: no scaling.
  auto big = s.scale(3, 3u << 20);
  EXPECT_EQ(big.count, 3u);
  EXPECT_EQ(big.bytes, 3u << 20);
  EXPECT_EQ(s.scale(0, 0).count, 0u);
  EXPECT_EQ(s.describe(), "poisson-1024B");
}

TEST(SampleScaling, ExponentialTableHasTheMean) {
  auto t = SampleScaling::exponential_table(4096, 1024);
  ASSERT_EQ(t.size(), 1024u);
  EXPECT_TRUE(std::is_sorted(t.begin(), t.end()));
  EXPECT_GE(t.front(), 1u);
  double mean = std::accumulate(t.begin(), t.end(), 0.0) / t.size();
  // Stratified quantiles truncate the tail a little: within 1% of the mean.
  EXPECT_NEAR(mean, 4096, 41);
}

namespace {
ma_stack_key key(std::uint32_t pid, std::int32_t ustack) {
  return ma_stack_key{pid, ustack, -1, MA_ORIGIN_USER};
}
ma_alloc_info live(const ma_stack_key& k, std::uint64_t size, std::uint64_t ts) {
  ma_alloc_info i{};
  i.size = size;
  i.ts_ns = ts;
  i.stack = k;
  return i;
}
}  // namespace

TEST(SiteTable, JoinsTotalsAndLiveAllocationsPerSite) {
  SiteTable t;
  t.add_site(key(1, 10), {1000, 4096000, 0, 0});
  t.add_site(key(1, 11), {10000, 640000, 10000, 640000});
  for (int i = 0; i < 3; ++i) t.add_outstanding(live(key(1, 10), 4096, 100 + i), 1000, 0);
  t.add_outstanding(live(key(2, 10), 8, 50), 1000, 0);  // another process, same stack id
  auto rows = t.rows();
  ASSERT_EQ(rows.size(), 3u);
  const SiteRow* leak = nullptr;
  for (const auto& r : rows)
    if (r.key.tgid == 1 && r.key.user_stack_id == 10) leak = &r;
  ASSERT_NE(leak, nullptr);
  EXPECT_EQ(leak->allocs, 1000u);
  EXPECT_EQ(leak->outstanding, 3u);
  EXPECT_EQ(leak->outstanding_bytes, 3u * 4096);
  EXPECT_EQ(leak->oldest_ns, 100u);
}

TEST(SiteTable, MinAgeLeavesYoungAllocationsOut) {
  SiteTable t;
  t.add_outstanding(live(key(1, 1), 10, 900), 1000, 500);  // 100 ns old: too young
  t.add_outstanding(live(key(1, 1), 20, 100), 1000, 500);  // 900 ns old
  auto rows = t.rows();
  ASSERT_EQ(rows.size(), 1u);
  EXPECT_EQ(rows[0].outstanding, 1u);
  EXPECT_EQ(rows[0].outstanding_bytes, 20u);
}

TEST(SiteTable, TopKeepsTheLargestByEachMeasure) {
  std::vector<SiteRow> rows(5);
  for (int i = 0; i < 5; ++i) rows[i].key = key(1, i);
  rows[0].bytes = 1000, rows[0].allocs = 1;  // largest by bytes
  rows[1].bytes = 10, rows[1].allocs = 500;  // largest by count
  rows[2].bytes = 5, rows[2].allocs = 1, rows[2].outstanding = 1, rows[2].outstanding_bytes = 5;
  rows[3].bytes = 4, rows[3].allocs = 1;
  rows[4].bytes = 3, rows[4].allocs = 1;
  auto top = SiteTable::top(rows, 1);
  ASSERT_EQ(top.size(), 3u);
  EXPECT_EQ(top[0].key.user_stack_id, 0);  // ordered by bytes
  EXPECT_EQ(top[1].key.user_stack_id, 1);
  EXPECT_EQ(top[2].key.user_stack_id, 2);
  EXPECT_EQ(SiteTable::top(rows, 0).size(), 5u);
}
