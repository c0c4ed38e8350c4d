#include <gtest/gtest.h>

#include <thread>

#include "dispatch/bounded_queue.hpp"
#include "dispatch/ring_dispatcher.hpp"

TEST(BoundedQueue, RefusesWhenFullAndNeverBlocksProducers) {
  loupe::BoundedQueue<int> q(2);
  EXPECT_TRUE(q.try_push(1));
  EXPECT_TRUE(q.try_push(2));
  EXPECT_FALSE(q.try_push(3));
  EXPECT_EQ(q.high_water(), 2u);
  EXPECT_EQ(*q.pop(std::chrono::milliseconds(1)), 1);
  q.close();
  EXPECT_FALSE(q.try_push(4));
  EXPECT_EQ(*q.pop(std::chrono::milliseconds(1)), 2);
  EXPECT_FALSE(q.pop(std::chrono::milliseconds(1)).has_value());
}

TEST(RingHeader, MinimalDecodeChecksSizeTypeVersion) {
  loupe_ring_spec spec{};
  spec.record_type = 7;
  spec.record_version = 2;
  spec.min_len = 16;
  spec.max_len = 64;
  struct {
    loupe_ring_header h;
    std::uint8_t body[56];
  } rec{};
  rec.h = {7, 2, 24};
  EXPECT_EQ(loupe::RingDispatcher::check_header(spec, &rec, 24), nullptr);
  EXPECT_STREQ(loupe::RingDispatcher::check_header(spec, &rec, 4),
               "shorter than the record header");
  rec.h.type = 8;
  EXPECT_STREQ(loupe::RingDispatcher::check_header(spec, &rec, 24), "unexpected record type");
  rec.h = {7, 3, 24};
  EXPECT_STREQ(loupe::RingDispatcher::check_header(spec, &rec, 24), "unexpected record version");
  rec.h = {7, 2, 20};
  EXPECT_STREQ(loupe::RingDispatcher::check_header(spec, &rec, 24),
               "header length disagrees with the ring's");
  rec.h = {7, 2, 12};
  EXPECT_STREQ(loupe::RingDispatcher::check_header(spec, &rec, 12),
               "shorter than the declared minimum");
  rec.h = {7, 2, 72};
  EXPECT_STREQ(loupe::RingDispatcher::check_header(spec, &rec, 72),
               "longer than the declared maximum");
}

TEST(RingDispatcher, RejectsIncompleteSpecs) {
  loupe::RingDispatcher d;
  loupe_ring_spec spec{};
  spec.size = sizeof(spec);
  spec.map_fd = -1;
  EXPECT_EQ(d.add_ring("p", spec).error(), "ring spec has no map_fd");
  spec.map_fd = 3;
  EXPECT_EQ(d.add_ring("p", spec).error(), "ring spec has no decode callback");
}
