#include <gtest/gtest.h>

#include "dispatch/owned_record.hpp"

TEST(Percentiles, ComeFromBucketBoundsWithErrorBound) {
  // 100 values: 50 in [1024, 2048), 45 in [2048, 4096), 5 in [65536, 131072)
  loupe_bucket b[] = {{1024, 2048, 50}, {2048, 4096, 45}, {65536, 131072, 5}};
  auto p = loupe::compute_percentiles(b, 3, 1100, 100000);
  ASSERT_EQ(p.size(), 5u);
  EXPECT_DOUBLE_EQ(p[0].quantile, 0.5);
  EXPECT_EQ(p[0].lower, 1100u);  // clamped to min
  EXPECT_EQ(p[0].upper, 2048u);
  EXPECT_EQ(p[1].lower, 2048u);    // p90 in the second bucket
  EXPECT_EQ(p[3].lower, 65536u);   // p99 in the last
  EXPECT_EQ(p[3].upper, 100001u);  // clamped to max
  for (auto& q : p) {
    EXPECT_GE(q.value, q.lower);
    EXPECT_LT(q.value, q.upper);
  }
}

TEST(Percentiles, EmptyHistogramHasNone) {
  loupe_bucket b[] = {{0, 1, 0}};
  EXPECT_TRUE(loupe::compute_percentiles(b, 1, 0, 0).empty());
}

TEST(OwnedRecord, DeepCopiesAndAddsHostFields) {
  std::string name = "lat", key = "target", val = "read";
  loupe_label l{key.c_str(), val.c_str()};
  loupe_bucket b[] = {{4, 8, 2}, {1, 2, 1}};
  loupe_histogram h{};
  h.size = sizeof(h);
  h.scheme = LOUPE_BUCKETS_LOG2;
  h.unit = "ns";
  h.buckets = b;
  h.n_buckets = 2;
  h.count = 3;
  h.min = 1;
  h.max = 7;
  loupe_record r{};
  r.size = sizeof(r);
  r.kind = LOUPE_RECORD_HISTOGRAM;
  r.name = name.c_str();
  r.labels = &l;
  r.n_labels = 1;
  r.histogram = &h;
  ASSERT_EQ(loupe::check_record(r), "");
  loupe::OwnedRecord owned(r, "latency", 10, 20);
  name = "XXX";
  val = "YYY";
  b[0].count = 99;
  const auto& v = owned.view();
  EXPECT_STREQ(v.name, "lat");
  EXPECT_STREQ(v.plugin, "latency");
  EXPECT_STREQ(v.labels[0].value, "read");
  EXPECT_EQ(v.window_start_ns, 10u);
  EXPECT_EQ(v.histogram->buckets[0].lower, 1u);  // sorted
  EXPECT_EQ(v.histogram->buckets[1].count, 2u);
  EXPECT_EQ(v.histogram->n_percentiles, 5u);
}

TEST(OwnedRecord, MalformedRecordsAreNamed) {
  loupe_record r{};
  r.size = sizeof(r);
  r.kind = LOUPE_RECORD_EVENT;
  EXPECT_EQ(loupe::check_record(r), "record has no name");
  r.name = "x";
  EXPECT_EQ(loupe::check_record(r), "event record without event payload");
  r.kind = 77;
  EXPECT_NE(loupe::check_record(r).find("unknown record kind"), std::string::npos);
}
