// SPDX-License-Identifier: Apache-2.0
#include <gtest/gtest.h>

#include <stdexcept>
#include <vector>

#include "perf_event_sampler.hpp"

using loupe::cpusample::parse_cpu_list;
using loupe::cpusample::SamplingSpec;

TEST(CpuList, RangesAndSinglesAsTheKernelWritesThem) {
  EXPECT_EQ(parse_cpu_list("0-1\n"), (std::vector<int>{0, 1}));
  EXPECT_EQ(parse_cpu_list("0"), (std::vector<int>{0}));
  EXPECT_EQ(parse_cpu_list("0-2,5,7-8"), (std::vector<int>{0, 1, 2, 5, 7, 8}));
}

TEST(CpuList, MalformedTextIsRefused) {
  EXPECT_THROW(parse_cpu_list(""), std::invalid_argument);
  EXPECT_THROW(parse_cpu_list("a-b"), std::invalid_argument);
  EXPECT_THROW(parse_cpu_list("3-1"), std::invalid_argument);
  EXPECT_THROW(parse_cpu_list("1,-2"), std::invalid_argument);
}

TEST(CpuList, OnlineCpusMatchSysconf) {
  EXPECT_EQ(static_cast<long>(loupe::cpusample::online_cpus().size()),
            sysconf(_SC_NPROCESSORS_ONLN));
}

TEST(SamplingSpec, DescribesFrequencyOrPeriod) {
  EXPECT_EQ(SamplingSpec{}.describe(), "99 Hz");
  EXPECT_EQ((SamplingSpec{99, 1000000}).describe(), "every 1000000 ns of CPU time");
}
