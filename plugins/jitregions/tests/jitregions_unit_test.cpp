// SPDX-License-Identifier: Apache-2.0
//
// The region table on its own: installs, removals that trim and split, generations of
// reused addresses, sample attribution and first-execution latency, and the bounds.
#include <gtest/gtest.h>

#include "region_table.hpp"

using loupe::jitregions::RegionSource;
using loupe::jitregions::RegionTable;
using loupe::jitregions::TableLimits;

namespace {
constexpr std::uint64_t kA = 0x7f0000000000;
}

TEST(RegionTable, SampleInRegionIsAttributedWithFirstExecLatency) {
  RegionTable t;
  t.install(10, 11, "jit", kA, 100, 1000, RegionSource::kMprotect);  // rounded to a page
  std::uint64_t first = 0;
  EXPECT_EQ(t.sample(10, 12, "jit", kA + 4095, 1500, &first)->start, kA);
  EXPECT_EQ(first, 500u);
  first = 0;
  t.sample(10, 12, "jit", kA + 8, 1600, &first);
  EXPECT_EQ(first, 0u);  // only the first sample after the install
  EXPECT_EQ(t.sample(10, 11, "jit", kA + 4096, 1700, nullptr), nullptr);
  const auto& p = t.processes().at(10);
  EXPECT_EQ(p.samples, 3u);
  EXPECT_EQ(p.samples_in_regions, 2u);
  EXPECT_EQ(p.samples_by_installer, 0u);
  EXPECT_EQ(p.live.at(kA).exec_tids.at(12), 2u);
  EXPECT_EQ(p.first_exec_latencies, (std::vector<std::uint64_t>{500}));
}

TEST(RegionTable, SeededRegionsTakeSamplesButClaimNoInstallOrLatency) {
  RegionTable t;
  t.seed(10, "node", kA, 8192, 1000);
  std::uint64_t first = 7;
  EXPECT_EQ(t.sample(10, 12, "node", kA + 5000, 1500, &first)->source, RegionSource::kPreexisting);
  EXPECT_EQ(first, 7u);  // install time unknown: no install-to-execution latency
  const auto& p = t.processes().at(10);
  EXPECT_EQ(p.installs, 0u);
  EXPECT_EQ(p.preexisting, 1u);
  EXPECT_TRUE(p.first_exec_latencies.empty());
  // New code over the seeded region replaces it like any other install.
  t.install(10, 11, "node", kA, 4096, 2000, RegionSource::kMprotect);
  EXPECT_EQ(t.sample(10, 12, "node", kA + 8, 2100, &first)->source, RegionSource::kMprotect);
  EXPECT_EQ(first, 100u);
}

TEST(RegionTable, RemovalTrimsAndSplitsAndRetires) {
  RegionTable t;
  t.install(10, 10, "jit", kA, 3 * 4096, 1, RegionSource::kMmapAnon);
  t.remove(10, kA + 4096, 4096, 2);  // the middle page
  const auto& p = t.processes().at(10);
  ASSERT_EQ(p.live.size(), 2u);
  EXPECT_EQ(p.live.at(kA).end, kA + 4096);
  EXPECT_EQ(p.live.at(kA + 2 * 4096).end, kA + 3 * 4096);
  ASSERT_EQ(p.retired.size(), 1u);
  EXPECT_EQ(p.retired[0].start, kA + 4096);
  EXPECT_EQ(p.retired[0].removed_ns, 2u);
  EXPECT_EQ(p.removals, 1u);
  EXPECT_EQ(t.sample(10, 10, "jit", kA + 4096 + 8, 3, nullptr), nullptr);
}

TEST(RegionTable, ReusedAddressGetsANewGeneration) {
  RegionTable t;
  t.install(10, 10, "jit", kA, 4096, 1, RegionSource::kMprotect);
  t.remove(10, kA, 4096, 2);
  t.install(10, 10, "jit", kA, 4096, 3, RegionSource::kMprotect);
  const auto& p = t.processes().at(10);
  EXPECT_EQ(p.live.at(kA).generation, 2u);
  EXPECT_EQ(p.installs, 2u);
  EXPECT_EQ(p.removals, 1u);
  // A sample before the reinstall time does not count as its first execution.
  std::uint64_t first = 0;
  t.sample(10, 10, "jit", kA, 2, &first);
  EXPECT_EQ(first, 0u);
}

TEST(RegionTable, ExitRetiresRegionsAndExpiryDropsTheProcess) {
  RegionTable t;
  t.install(10, 10, "jit", kA, 4096, 1, RegionSource::kMprotect);
  t.process_exit(10, 5);
  const auto& p = t.processes().at(10);
  EXPECT_TRUE(p.exited);
  EXPECT_TRUE(p.live.empty());
  ASSERT_EQ(p.retired.size(), 1u);
  EXPECT_EQ(p.removals, 0u);  // ending with the process is a lifetime, not churn
  t.expire_exited();
  EXPECT_TRUE(t.processes().empty());
}

TEST(RegionTable, BoundsEvictAndCount) {
  TableLimits lim;
  lim.max_processes = 2;
  lim.max_regions = 2;
  lim.max_retired = 1;
  RegionTable t(lim);
  for (int i = 0; i < 3; ++i)
    t.install(10, 10, "jit", kA + i * 0x10000, 4096, 10 + i, RegionSource::kMprotect);
  EXPECT_EQ(t.processes().at(10).live.size(), 2u);
  EXPECT_EQ(t.processes().at(10).live.count(kA), 0u);  // the oldest went
  EXPECT_EQ(t.processes().at(10).regions_evicted, 1u);
  t.remove(10, kA + 0x10000, 4096, 20);
  t.remove(10, kA + 0x20000, 4096, 21);
  EXPECT_EQ(t.processes().at(10).retired.size(), 1u);
  EXPECT_EQ(t.processes().at(10).retired_dropped, 1u);
  t.process_exit(10, 30);
  t.install(20, 20, "a", kA, 4096, 31, RegionSource::kMprotect);
  t.install(30, 30, "b", kA, 4096, 32, RegionSource::kMprotect);  // evicts the exited one
  EXPECT_EQ(t.processes().count(10), 0u);
  EXPECT_EQ(t.processes().size(), 2u);
  EXPECT_EQ(t.processes_evicted(), 1u);
}
