// SPDX-License-Identifier: Apache-2.0
//
// Owns every ring buffer plugins register. One reader thread drains them all: an epoll
// over the rings wakes it when a producer forces a wake-up, otherwise it drains on its own
// schedule every `max_delivery_delay` (producers skip wake-ups below a watermark), and it
// takes at most `batch_limit` records from one ring per round so a flooding ring cannot
// starve the others. It does the minimal decode (header size/type/version), copies the
// record once into a preallocated byte queue, and a worker thread runs the plugin's
// decode. A full queue applies the ring's policy (drop newest, coalesce by key, degrade
// to count-only) and counts; the reader never blocks on a consumer. Under sustained loss
// the reader raises the ring's in-kernel sampling divisor and lowers it once the loss
// stops; every change is reported through the event handler.
#ifndef LOUPE_DISPATCH_RING_DISPATCHER_HPP
#define LOUPE_DISPATCH_RING_DISPATCHER_HPP

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "dispatch/byte_queue.hpp"
#include "dispatch/capture_file.hpp"
#include "loupe/abi/host.h"
#include "util/result.hpp"

namespace loupe {

struct RingStats {
  std::string plugin;
  std::string ring;
  std::uint64_t lost_kernel = 0;   // reserve failures counted by the BPF side
  bool lost_kernel_known = false;  // false when the plugin gave no lost_map_fd
  std::uint64_t received = 0;      // records read from the ring
  std::uint64_t malformed = 0;     // failed the header checks
  std::uint64_t dropped_queue =
      0;                         // queue full (drop newest), or still queued at the drain deadline
  std::uint64_t abandoned = 0;   // of dropped_queue: still queued at the drain deadline
  std::uint64_t coalesced = 0;   // queue full, merged into per-key counts
  std::uint64_t count_only = 0;  // counted while the ring was degraded to count-only
  std::uint64_t decode_errors = 0;  // plugin decode returned an error
  std::uint64_t decoded = 0;        // plugin decode succeeded
  std::uint64_t queued = 0;         // in the queue now (0 after stop())
  std::uint64_t queue_high_water = 0;
  std::uint64_t max_delay_ns = 0;  // read -> decode done, worst of the sampled records (1 in 16)
  std::uint64_t mean_delay_ns = 0;
  std::uint32_t divisor = 1;  // current in-kernel sampling divisor (1 = everything)
  std::uint64_t coalesced_keys = 0;
  // produced = lost_kernel + received; received = malformed + dropped_queue + coalesced
  //            + count_only + decode_errors + decoded + queued.
};

// A change the reader made to a ring on its own: sampling divisor raised or lowered,
// count-only mode entered or left.
struct DispatchEvent {
  std::string plugin;
  std::string ring;
  std::string what;  // "divisor_raised", "divisor_lowered", "count_only_entered", "count_only_left"
  std::uint32_t old_divisor = 1;
  std::uint32_t new_divisor = 1;
  double loss_ratio = 0;  // over the last feedback period
};

struct CoalescedCount {
  std::string plugin;
  std::string ring;
  std::uint64_t key;  // kCoalesceOverflowKey collects keys beyond the table's bound
  std::uint64_t count;
};

class RingDispatcher {
 public:
  static constexpr std::uint64_t kCoalesceOverflowKey = ~std::uint64_t{0};

  struct Options {
    std::chrono::milliseconds max_delivery_delay{20};  // the timed drain period
    std::size_t queue_capacity = 1 << 16;              // records
    std::size_t queue_bytes = 16u << 20;               // preallocated once
    std::size_t batch_limit = 4096;                    // records per ring per round
    std::chrono::milliseconds feedback_period{250};
    double raise_loss_ratio = 0.01;     // losses / offered over one period that raise the divisor
    int lower_after_clean_periods = 8;  // loss-free periods before halving it
    std::uint32_t max_divisor = 1024;
    double count_only_resume_fill = 0.25;  // leave count-only once the queue is this empty
    std::size_t max_coalesce_keys = 4096;
    bool replay = false;  // rings need no kernel map; records come from inject()
  };

  RingDispatcher();
  explicit RingDispatcher(Options opts);
  ~RingDispatcher();
  RingDispatcher(const RingDispatcher&) = delete;
  RingDispatcher& operator=(const RingDispatcher&) = delete;

  // Before the first add_ring().
  void configure(const Options& opts);
  const Options& options() const { return opts_; }
  // Called on the reader thread; must not block for long.
  void set_event_handler(std::function<void(const DispatchEvent&)> fn) {
    on_event_ = std::move(fn);
  }
  // Every record read is also appended here (raw, before checks). Before start(); borrowed.
  void set_capture(CaptureWriter* w) { capture_ = w; }

  // Before start(); the error says what is wrong with `spec`.
  Status add_ring(const std::string& plugin, const loupe_ring_spec& spec);
  void start();
  // Drains what the kernel still holds and what is queued, until `deadline`, then stops.
  void stop(std::chrono::steady_clock::time_point deadline);
  std::vector<RingStats> stats() const;
  std::size_t ring_count() const;
  // Registration order; the capture header and replay use it.
  std::vector<CaptureRing> ring_table() const;
  // Per-key counts merged since the last call (COALESCE rings), then reset.
  std::vector<CoalescedCount> take_coalesced();

  // Replay (and tests): hand one record to ring `index` as if the reader had read it.
  // Only while no reader thread runs (replay mode, or before start()). With
  // `wait_for_room`, a full queue waits instead of applying the policy (lossless replay).
  void inject(std::size_t index, const void* data, std::uint32_t len, bool wait_for_room);
  // The reader's periodic feedback step, public for tests.
  void feedback_tick();

  // The minimal decode, exposed for tests: nullptr = ok, else a reason.
  static const char* check_header(const loupe_ring_spec& spec, const void* data, std::size_t len);

 private:
  struct Ring;
  static int on_sample(void* ctx, void* data, std::size_t len);
  void accept(Ring& ring, const void* data, std::uint32_t len, std::uint64_t read_ns);
  void apply_policy(Ring& ring, const void* data, std::uint32_t len);
  bool drain_round();  // true when some ring hit its batch limit
  void reader_loop();
  void worker_loop();
  void process(const ByteQueue::Slot& slot, bool abandon);
  void emit_event(const Ring& ring, const char* what, std::uint32_t old_div, std::uint32_t new_div,
                  double ratio);

  Options opts_;
  mutable std::mutex mu_;
  std::vector<std::unique_ptr<Ring>> rings_;
  std::unique_ptr<ByteQueue> queue_;
  std::function<void(const DispatchEvent&)> on_event_;
  CaptureWriter* capture_ = nullptr;
  int epoll_fd_ = -1;
  std::thread reader_, worker_;
  std::atomic<bool> stop_reader_{false}, stop_worker_{false}, abandon_{false};
  std::chrono::steady_clock::time_point next_feedback_{};
  bool started_ = false;
};

}  // namespace loupe

#endif  // LOUPE_DISPATCH_RING_DISPATCHER_HPP
