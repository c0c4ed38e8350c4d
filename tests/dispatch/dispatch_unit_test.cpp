// SPDX-License-Identifier: Apache-2.0
// Dispatch without a kernel: the byte queue, the policies and the loss accounting with
// synthetic records fed through RingDispatcher::inject (the replay path), malformed bytes,
// and the capture file format.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <numeric>
#include <thread>
#include <vector>

#include "dispatch/byte_queue.hpp"
#include "dispatch/capture_file.hpp"
#include "dispatch/ring_dispatcher.hpp"

namespace {

using loupe::ByteQueue;
using loupe::RingDispatcher;

struct Rec {
  loupe_ring_header h;
  std::uint64_t key;
  std::uint64_t seq;
};

Rec make(std::uint64_t key, std::uint64_t seq) {
  return Rec{{5, 1, sizeof(Rec)}, key, seq};
}

struct Decoder {
  std::atomic<std::uint64_t> calls{0};
  std::atomic<std::uint64_t> sum_seq{0};
  std::atomic<bool> gate{true};  // false: decode waits (a stalled consumer)
  static int decode(void* u, const void* data, std::uint32_t len) {
    auto* d = static_cast<Decoder*>(u);
    while (!d->gate.load()) std::this_thread::sleep_for(std::chrono::microseconds(50));
    Rec r;
    std::memcpy(&r, data, sizeof(r));
    EXPECT_EQ(len, sizeof(Rec));
    d->calls++;
    d->sum_seq += r.seq;
    return r.seq == 999999 ? LOUPE_ERR_INVALID_ARG : LOUPE_OK;
  }
  static std::uint64_t key(void*, const void* data, std::uint32_t) {
    Rec r;
    std::memcpy(&r, data, sizeof(r));
    return r.key;
  }
};

loupe_ring_spec spec_for(Decoder& d, std::uint32_t policy) {
  loupe_ring_spec s{};
  s.size = sizeof(s);
  s.map_fd = s.lost_map_fd = s.divisor_map_fd = -1;
  s.name = "synthetic";
  s.record_type = 5;
  s.record_version = 1;
  s.min_len = s.max_len = sizeof(Rec);
  s.category = LOUPE_RING_DROPPABLE_SAMPLE;
  s.policy = policy;
  s.decode = &Decoder::decode;
  s.coalesce_key = &Decoder::key;
  s.user = &d;
  return s;
}

RingDispatcher::Options small_queue(std::size_t records) {
  RingDispatcher::Options o;
  o.replay = true;
  o.queue_capacity = records;
  o.queue_bytes = 1 << 16;
  o.max_delivery_delay = std::chrono::milliseconds(2);
  return o;
}

void expect_invariant(const loupe::RingStats& s) {
  EXPECT_EQ(s.received, s.malformed + s.dropped_queue + s.coalesced + s.count_only +
                            s.decode_errors + s.decoded + s.queued);
}

auto far_deadline() {
  return std::chrono::steady_clock::now() + std::chrono::seconds(10);
}

}  // namespace

TEST(ByteQueue, FifoAcrossWrapAroundWithVariableLengths) {
  ByteQueue q(4096, 0);
  std::vector<std::uint8_t> buf(300);
  std::uint64_t pushed = 0, popped = 0;
  for (int round = 0; round < 2000; ++round) {
    std::uint32_t len = 1 + static_cast<std::uint32_t>((round * 37) % 299);
    std::memset(buf.data(), round & 0xff, len);
    while (!q.try_push(static_cast<std::uint32_t>(round), buf.data(), len, round)) {
      ByteQueue::Slot s;
      ASSERT_TRUE(q.peek(&s));  // full means something is queued
      EXPECT_EQ(s.ring, popped);
      EXPECT_EQ(s.len, 1 + (popped * 37) % 299);
      EXPECT_EQ(s.data[0], popped & 0xff);
      EXPECT_EQ(s.data[s.len - 1], popped & 0xff);
      q.release(s);
      ++popped;
    }
    ++pushed;
  }
  ByteQueue::Slot s;
  while (q.peek(&s)) {
    EXPECT_EQ(s.ring, popped++);
    q.release(s);
  }
  EXPECT_EQ(pushed, popped);
  EXPECT_TRUE(q.empty());
  EXPECT_EQ(q.size(), 0u);
}

TEST(ByteQueue, RefusesWhenFullByRecordsOrBytesAndOversized) {
  ByteQueue by_records(1 << 16, 3);
  std::uint8_t b[64] = {};
  EXPECT_TRUE(by_records.try_push(0, b, 64, 0));
  EXPECT_TRUE(by_records.try_push(0, b, 64, 0));
  EXPECT_TRUE(by_records.try_push(0, b, 64, 0));
  EXPECT_FALSE(by_records.try_push(0, b, 64, 0));
  EXPECT_EQ(by_records.high_water(), 3u);
  ByteQueue by_bytes(4096, 0);
  int n = 0;
  while (by_bytes.try_push(0, b, 64, 0)) ++n;
  EXPECT_EQ(n, 4096 / (64 + 16));
  std::vector<std::uint8_t> huge(8192);
  ByteQueue empty(4096, 0);
  EXPECT_FALSE(empty.try_push(0, huge.data(), static_cast<std::uint32_t>(huge.size()), 0));
}

TEST(ByteQueue, ConcurrentProducerConsumerLosesNothingAccepted) {
  ByteQueue q(8192, 0);
  constexpr std::uint64_t kN = 200000;
  std::uint64_t accepted = 0, refused = 0, sum_in = 0;
  std::atomic<bool> done{false};
  std::uint64_t got = 0, sum_out = 0, last = 0;
  bool ordered = true;
  std::thread consumer([&] {
    ByteQueue::Slot s;
    for (;;) {
      if (q.peek(&s)) {
        std::uint64_t v;
        std::memcpy(&v, s.data, 8);
        ordered &= v >= last;
        last = v;
        sum_out += v;
        ++got;
        q.release(s);
      } else if (done.load()) {
        if (q.empty()) break;
      } else {
        q.wait(std::chrono::milliseconds(1));
      }
    }
  });
  for (std::uint64_t i = 1; i <= kN; ++i) {
    if (q.try_push(0, &i, 8, 0)) {
      ++accepted;
      sum_in += i;
    } else {
      ++refused;
    }
    if (i % 64 == 0) q.notify();
  }
  done = true;
  q.wake();
  consumer.join();
  EXPECT_EQ(accepted + refused, kN);
  EXPECT_EQ(got, accepted);
  EXPECT_EQ(sum_out, sum_in);
  EXPECT_TRUE(ordered);
}

TEST(RingDispatcherPolicy, DropNewestCountsEveryRefusal) {
  Decoder d;
  RingDispatcher rd(small_queue(4));
  ASSERT_TRUE(rd.add_ring("p", spec_for(d, LOUPE_BP_DROP_NEWEST)));
  for (int i = 0; i < 10; ++i) {
    Rec r = make(1, i);
    rd.inject(0, &r, sizeof(r), false);  // no worker yet: the queue fills at 4
  }
  auto s = rd.stats()[0];
  EXPECT_EQ(s.received, 10u);
  EXPECT_EQ(s.dropped_queue, 6u);
  EXPECT_EQ(s.queued, 4u);
  expect_invariant(s);
  rd.start();
  rd.stop(far_deadline());
  s = rd.stats()[0];
  EXPECT_EQ(s.decoded, 4u);
  EXPECT_EQ(d.sum_seq.load(), 0u + 1 + 2 + 3);  // the oldest were kept
  EXPECT_EQ(s.queued, 0u);
  expect_invariant(s);
}

TEST(RingDispatcherPolicy, CoalesceKeepsPerKeyCounts) {
  Decoder d;
  RingDispatcher rd(small_queue(2));
  ASSERT_TRUE(rd.add_ring("p", spec_for(d, LOUPE_BP_COALESCE)));
  for (int i = 0; i < 12; ++i) {
    Rec r = make(static_cast<std::uint64_t>(i % 3), i);
    rd.inject(0, &r, sizeof(r), false);
  }
  auto s = rd.stats()[0];
  EXPECT_EQ(s.coalesced, 10u);
  EXPECT_EQ(s.coalesced_keys, 3u);
  auto keys = rd.take_coalesced();
  ASSERT_EQ(keys.size(), 3u);
  std::uint64_t total = 0;
  for (auto& k : keys) {
    EXPECT_EQ(k.plugin, "p");
    EXPECT_EQ(k.ring, "synthetic");
    total += k.count;
  }
  EXPECT_EQ(total, 10u);
  // records 2..11 were merged: keys 2,0,1,2,0,1,... -> 4 of key 2, 3 of keys 0 and 1
  EXPECT_EQ(keys[0].key, 0u);
  EXPECT_EQ(keys[0].count, 3u);
  EXPECT_EQ(keys[2].count, 4u);
  EXPECT_TRUE(rd.take_coalesced().empty());  // handed over once
  rd.start();
  rd.stop(far_deadline());
  expect_invariant(rd.stats()[0]);
}

TEST(RingDispatcherPolicy, CoalesceBoundsTheKeyTable) {
  Decoder d;
  auto o = small_queue(1);
  o.max_coalesce_keys = 4;
  RingDispatcher rd(o);
  ASSERT_TRUE(rd.add_ring("p", spec_for(d, LOUPE_BP_COALESCE)));
  for (int i = 0; i < 101; ++i) {
    Rec r = make(static_cast<std::uint64_t>(i), i);
    rd.inject(0, &r, sizeof(r), false);
  }
  auto keys = rd.take_coalesced();
  ASSERT_EQ(keys.size(), 5u);
  EXPECT_EQ(keys.back().key, RingDispatcher::kCoalesceOverflowKey);
  EXPECT_EQ(keys.back().count, 96u);
}

TEST(RingDispatcherPolicy, CountOnlyDegradesUntilTheQueueDrains) {
  Decoder d;
  auto o = small_queue(4);
  o.count_only_resume_fill = 0.25;
  RingDispatcher rd(o);
  std::vector<loupe::DispatchEvent> events;
  rd.set_event_handler([&](const loupe::DispatchEvent& e) { events.push_back(e); });
  ASSERT_TRUE(rd.add_ring("p", spec_for(d, LOUPE_BP_COUNT_ONLY)));
  for (int i = 0; i < 8; ++i) {
    Rec r = make(1, i);
    rd.inject(0, &r, sizeof(r), false);
  }
  auto s = rd.stats()[0];
  EXPECT_EQ(s.count_only, 4u);
  ASSERT_EQ(events.size(), 1u);
  EXPECT_EQ(events[0].what, "count_only_entered");
  rd.start();
  // The worker empties the queue; the next record leaves count-only mode and is queued.
  for (int i = 0; i < 200 && rd.stats()[0].queued; ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  Rec r = make(1, 100);
  rd.inject(0, &r, sizeof(r), false);
  rd.stop(far_deadline());
  s = rd.stats()[0];
  ASSERT_EQ(events.size(), 2u);
  EXPECT_EQ(events[1].what, "count_only_left");
  EXPECT_EQ(s.decoded, 5u);
  EXPECT_EQ(s.count_only, 4u);
  expect_invariant(s);
}

TEST(RingDispatcherPolicy, MalformedBytesAreCountedAndSkipped) {
  Decoder d;
  RingDispatcher rd(small_queue(64));
  auto spec = spec_for(d, LOUPE_BP_DROP_NEWEST);
  spec.max_len = sizeof(Rec);
  ASSERT_TRUE(rd.add_ring("p", spec));
  rd.start();
  Rec good = make(1, 1);
  rd.inject(0, &good, sizeof(good), false);
  rd.inject(0, &good, 4, false);  // truncated below the header
  Rec wrong_version = good;
  wrong_version.h.version = 2;
  rd.inject(0, &wrong_version, sizeof(Rec), false);
  Rec wrong_type = good;
  wrong_type.h.type = 6;
  rd.inject(0, &wrong_type, sizeof(Rec), false);
  struct {
    Rec r;
    std::uint8_t extra[64];
  } big{};
  big.r = good;
  big.r.h.len = sizeof(big);
  rd.inject(0, &big, sizeof(big), false);  // oversized
  Rec lying = good;
  lying.h.len = 12;  // header disagrees with the ring's length
  rd.inject(0, &lying, sizeof(Rec), false);
  Rec bad_decode = make(1, 999999);
  rd.inject(0, &bad_decode, sizeof(Rec), false);
  rd.stop(far_deadline());
  auto s = rd.stats()[0];
  EXPECT_EQ(s.received, 7u);
  EXPECT_EQ(s.malformed, 5u);
  EXPECT_EQ(s.decoded, 1u);
  EXPECT_EQ(s.decode_errors, 1u);
  EXPECT_EQ(d.calls.load(), 2u);  // the plugin never saw the malformed ones
  expect_invariant(s);
}

TEST(RingDispatcherPolicy, InvariantUnderAStalledConsumerAndDeadline) {
  Decoder d;
  d.gate = false;  // decode blocks: the queue fills and stays full
  RingDispatcher rd(small_queue(128));
  ASSERT_TRUE(rd.add_ring("p", spec_for(d, LOUPE_BP_DROP_NEWEST)));
  rd.start();
  for (int i = 0; i < 5000; ++i) {
    Rec r = make(1, i);
    rd.inject(0, &r, sizeof(r), false);
  }
  auto s = rd.stats()[0];
  EXPECT_GT(s.dropped_queue, 4000u);
  expect_invariant(s);
  // Past the deadline what is still queued is counted as dropped, not lost silently.
  std::thread release([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    d.gate = true;
  });
  rd.stop(std::chrono::steady_clock::now() + std::chrono::milliseconds(20));
  release.join();
  s = rd.stats()[0];
  EXPECT_EQ(s.queued, 0u);
  EXPECT_EQ(s.received, 5000u);
  EXPECT_LE(s.decoded, 2u);
  expect_invariant(s);
}

TEST(RingDispatcherPolicy, WaitForRoomIsLossless) {
  Decoder d;
  RingDispatcher rd(small_queue(8));
  ASSERT_TRUE(rd.add_ring("p", spec_for(d, LOUPE_BP_DROP_NEWEST)));
  rd.start();
  for (int i = 0; i < 20000; ++i) {
    Rec r = make(1, i);
    rd.inject(0, &r, sizeof(r), true);
  }
  rd.stop(far_deadline());
  auto s = rd.stats()[0];
  EXPECT_EQ(s.decoded, 20000u);
  EXPECT_EQ(s.dropped_queue, 0u);
  EXPECT_EQ(d.sum_seq.load(), 20000ull * 19999 / 2);
}

TEST(RingDispatcherSpec, RefusesBadSpecs) {
  Decoder d;
  RingDispatcher live;  // not replay: a kernel map is required
  auto spec = spec_for(d, LOUPE_BP_DROP_NEWEST);
  EXPECT_EQ(live.add_ring("p", spec).error(), "ring spec has no map_fd");
  RingDispatcher rd(small_queue(4));
  spec.policy = 9;
  EXPECT_EQ(rd.add_ring("p", spec).error(), "ring spec policy 9 is unknown");
  spec.policy = LOUPE_BP_COALESCE;
  spec.coalesce_key = nullptr;
  EXPECT_EQ(rd.add_ring("p", spec).error(), "COALESCE policy needs a coalesce_key callback");
  spec.min_len = 2;
  EXPECT_EQ(rd.add_ring("p", spec).error(), "ring spec min_len is smaller than the record header");
}

TEST(CaptureFile, RoundTripsRingsAndRecords) {
  auto path = std::filesystem::temp_directory_path() / ("loupe-cap-" + std::to_string(getpid()));
  std::vector<loupe::CaptureRing> rings = {{"latency", "outliers", 3, 2, 16, 64},
                                           {"flood#2", "flood", 9, 1, 24, 24}};
  {
    loupe::CaptureWriter w(path.string(), rings);
    Rec r = make(4, 7);
    w.append(1, &r, sizeof(r), 42);
    w.append(0, "abcd", 4, 43);
    EXPECT_EQ(w.close(), "");
  }
  loupe::CaptureReader rd(path.string());
  ASSERT_EQ(rd.rings().size(), 2u);
  EXPECT_EQ(rd.rings()[1].instance, "flood#2");
  EXPECT_EQ(rd.rings()[0].ring, "outliers");
  EXPECT_EQ(rd.rings()[0].record_version, 2);
  EXPECT_EQ(rd.rings()[0].max_len, 64u);
  loupe::CaptureReader::Record rec;
  ASSERT_TRUE(rd.next(&rec));
  EXPECT_EQ(rec.ring, 1u);
  EXPECT_EQ(rec.read_ns, 42u);
  ASSERT_EQ(rec.bytes.size(), sizeof(Rec));
  ASSERT_TRUE(rd.next(&rec));
  EXPECT_EQ(std::string(rec.bytes.begin(), rec.bytes.end()), "abcd");
  EXPECT_FALSE(rd.next(&rec));
  // A truncated tail is an error naming the record, not a silent end.
  std::filesystem::resize_file(path, std::filesystem::file_size(path) - 2);
  loupe::CaptureReader cut(path.string());
  ASSERT_TRUE(cut.next(&rec));
  EXPECT_THROW(cut.next(&rec), std::runtime_error);
  std::ofstream(path, std::ios::binary) << "not a capture";
  EXPECT_THROW(loupe::CaptureReader{path.string()}, std::runtime_error);
  std::filesystem::remove(path);
}
