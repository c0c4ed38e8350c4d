// SPDX-License-Identifier: Apache-2.0
//
// The queue between the ring reader and the decode worker: one producer, one consumer, a
// fixed arena of bytes allocated once. A record is copied once into the arena (no
// allocation per record: a std::vector per record cost ~2x the copy, see
// docs/performance.md) and read in place by the consumer, which releases it after decode.
// A full arena refuses the record and the caller applies the ring's policy; the producer
// never blocks. The consumer sleeps on a condition variable that the producer signals once
// per batch, not per record.
#ifndef LOUPE_DISPATCH_BYTE_QUEUE_HPP
#define LOUPE_DISPATCH_BYTE_QUEUE_HPP

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <cstring>
#include <memory>
#include <mutex>

namespace loupe {

class ByteQueue {
 public:
  struct Slot {
    std::uint32_t ring;     // the producer's ring index
    std::uint32_t len;      // payload bytes
    std::uint64_t read_ns;  // when the reader took it from the kernel ring
    const std::uint8_t* data;
  };

  // `bytes` is rounded up to a power of two; `max_records` bounds the depth as well.
  ByteQueue(std::size_t bytes, std::size_t max_records)
      : cap_(round_pow2(bytes < 4096 ? 4096 : bytes)),
        max_records_(max_records ? max_records : SIZE_MAX),
        buf_(new std::uint8_t[cap_]) {}

  // Producer. False when there is no room (caller counts); never blocks.
  bool try_push(std::uint32_t ring, const void* data, std::uint32_t len, std::uint64_t read_ns) {
    const std::size_t need = kHdr + align8(len);
    if (need + kHdr > cap_ / 2) return false;  // oversized for this arena: never fits well
    std::uint64_t head = head_.load(std::memory_order_relaxed);
    // The consumer's position is re-read only when the cached one says "full": one shared
    // cache line touched per batch, not per record.
    if (pushed_ - popped_cache_ >= max_records_)
      popped_cache_ = popped_.load(std::memory_order_acquire);
    if (pushed_ - popped_cache_ >= max_records_) return false;
    std::size_t off = head & (cap_ - 1);
    std::size_t pad = cap_ - off < need ? cap_ - off : 0;  // wrap: skip the end of the arena
    if (head + pad + need - tail_cache_ > cap_) {
      tail_cache_ = tail_.load(std::memory_order_acquire);
      if (head + pad + need - tail_cache_ > cap_) return false;
    }
    if (pad) {
      Hdr skip{kSkip, 0, 0};
      std::memcpy(buf_.get() + off, &skip, sizeof(skip) <= cap_ - off ? sizeof(skip) : cap_ - off);
      head += pad;
      off = 0;
    }
    Hdr h{len, ring, read_ns};
    std::memcpy(buf_.get() + off, &h, kHdr);
    std::memcpy(buf_.get() + off + kHdr, data, len);
    head_.store(head + need, std::memory_order_release);
    ++pushed_;
    pushed_pub_.store(pushed_, std::memory_order_relaxed);
    if (pushed_ - popped_cache_ > high_water_local_) sample_depth();
    return true;
  }

  // Producer, once per batch: wakes the consumer if it sleeps.
  void notify() {
    sample_depth();
    std::atomic_thread_fence(std::memory_order_seq_cst);  // pairs with wait(): no lost wake-up
    if (sleeping_.load(std::memory_order_acquire)) {
      std::lock_guard lock(mu_);
      cv_.notify_one();
    }
  }

  // Consumer: the oldest record, valid until release(); false when empty.
  bool peek(Slot* out) {
    std::uint64_t tail = tail_.load(std::memory_order_relaxed);
    if (tail == head_cache_) {
      head_cache_ = head_.load(std::memory_order_acquire);
      if (tail == head_cache_) return false;
    }
    std::size_t off = tail & (cap_ - 1);
    Hdr h;
    if (cap_ - off < kHdr) {
      tail += cap_ - off;  // the producer's skip did not fit a whole header
      off = 0;
    } else {
      std::memcpy(&h, buf_.get() + off, kHdr);
      if (h.len == kSkip) {
        tail += cap_ - off;
        off = 0;
      }
    }
    tail_.store(tail, std::memory_order_relaxed);
    std::memcpy(&h, buf_.get() + off, kHdr);
    *out = Slot{h.ring, h.len, h.read_ns, buf_.get() + off + kHdr};
    return true;
  }
  void release(const Slot& s) {
    tail_.store(tail_.load(std::memory_order_relaxed) + kHdr + align8(s.len),
                std::memory_order_release);
    popped_.store(popped_.load(std::memory_order_relaxed) + 1, std::memory_order_release);
  }

  // Consumer: sleeps until something is queued or the timeout passes.
  void wait(std::chrono::milliseconds timeout) {
    std::unique_lock lock(mu_);
    sleeping_.store(true, std::memory_order_seq_cst);
    if (empty() && !woken_) cv_.wait_for(lock, timeout);
    woken_ = false;
    sleeping_.store(false, std::memory_order_relaxed);
  }
  // Any thread: the consumer returns from its wait (now, or at once if it is not yet in
  // it: a wake-up before the wait is not lost).
  void wake() {
    std::lock_guard lock(mu_);
    woken_ = true;
    cv_.notify_all();
  }

  bool empty() const {
    return head_.load(std::memory_order_acquire) == tail_.load(std::memory_order_acquire);
  }
  // Any thread: records queued now.
  std::size_t size() const {
    std::uint64_t popped = popped_.load(std::memory_order_acquire);
    std::uint64_t pushed = pushed_pub_.load(std::memory_order_acquire);
    return pushed > popped ? static_cast<std::size_t>(pushed - popped) : 0;
  }
  std::size_t high_water() const { return high_water_.load(std::memory_order_relaxed); }
  std::size_t capacity_bytes() const { return cap_; }
  // Fill level in [0, 1]: by bytes or by records, whichever is fuller.
  double fill() const {
    double b = static_cast<double>(head_.load(std::memory_order_relaxed) -
                                   tail_.load(std::memory_order_relaxed)) /
               static_cast<double>(cap_);
    double r = max_records_ == SIZE_MAX
                   ? 0
                   : static_cast<double>(size()) / static_cast<double>(max_records_);
    return b > r ? b : r;
  }

 private:
  struct Hdr {
    std::uint32_t len;
    std::uint32_t ring;
    std::uint64_t read_ns;
  };
  static constexpr std::size_t kHdr = sizeof(Hdr);
  static constexpr std::uint32_t kSkip = 0xffffffffu;
  static std::size_t align8(std::size_t n) { return (n + 7) & ~std::size_t{7}; }
  static std::size_t round_pow2(std::size_t n) {
    std::size_t p = 1;
    while (p < n) p <<= 1;
    return p;
  }

  // Producer: the depth now, for the high-water mark (sampled per batch and when the
  // estimate from the cached consumer position would set a new mark).
  void sample_depth() {
    popped_cache_ = popped_.load(std::memory_order_acquire);
    std::size_t depth = static_cast<std::size_t>(pushed_ - popped_cache_);
    if (depth > high_water_local_) {
      high_water_local_ = depth;
      high_water_.store(depth, std::memory_order_relaxed);
    }
  }

  const std::size_t cap_;
  const std::size_t max_records_;
  std::unique_ptr<std::uint8_t[]> buf_;
  // Producer side.
  alignas(64) std::atomic<std::uint64_t> head_{0};
  std::atomic<std::uint64_t> pushed_pub_{0};
  std::uint64_t pushed_ = 0, popped_cache_ = 0, tail_cache_ = 0;
  std::size_t high_water_local_ = 0;
  std::atomic<std::size_t> high_water_{0};
  // Consumer side.
  alignas(64) std::atomic<std::uint64_t> tail_{0};
  std::atomic<std::uint64_t> popped_{0};
  std::uint64_t head_cache_ = 0;
  alignas(64) std::atomic<bool> sleeping_{false};
  bool woken_ = false;  // under mu_
  std::mutex mu_;
  std::condition_variable cv_;
};

}  // namespace loupe

#endif  // LOUPE_DISPATCH_BYTE_QUEUE_HPP
