#include <gtest/gtest.h>

#include <deque>
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

// The sink's thread takes what is queued at once, in order, so a report's records wake it
// once, not once each; a flush marker keeps its place among them.
TEST(BoundedQueue, TheConsumerTakesEverythingQueuedInOrder) {
  loupe::BoundedQueue<int> q(3);
  std::deque<int> batch;
  EXPECT_FALSE(q.pop_all(std::chrono::milliseconds(1), &batch));
  EXPECT_TRUE(q.try_push(1));
  EXPECT_TRUE(q.try_push(2));
  q.push_always(3);
  q.push_always(4);  // a control item past the capacity
  ASSERT_TRUE(q.pop_all(std::chrono::milliseconds(1), &batch));
  EXPECT_EQ(batch, (std::deque<int>{1, 2, 3, 4}));
  EXPECT_EQ(q.size(), 0u);
  // While the consumer works through its batch, the queue takes a whole capacity again.
  EXPECT_TRUE(q.try_push(5));
  EXPECT_TRUE(q.try_push(6));
  EXPECT_TRUE(q.try_push(7));
  EXPECT_FALSE(q.try_push(8));
  ASSERT_TRUE(q.pop_all(std::chrono::milliseconds(1), &batch));
  EXPECT_EQ(batch, (std::deque<int>{1, 2, 3, 4, 5, 6, 7}));
  q.close();
  batch.clear();
  EXPECT_FALSE(q.pop_all(std::chrono::milliseconds(1), &batch));
  // A consumer waiting is woken by a push from another thread.
  loupe::BoundedQueue<int> w(4);
  std::thread producer([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    w.try_push(9);
  });
  EXPECT_TRUE(w.pop_all(std::chrono::seconds(5), &batch));
  producer.join();
  EXPECT_EQ(batch, (std::deque<int>{9}));
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
