// SPDX-License-Identifier: Apache-2.0
//
// Owns every ring buffer plugins register: one reader thread drains them all (epoll via
// libbpf's ring_buffer, plus a timed drain so producers can skip wake-ups), does the
// minimal decode (header size/type/version) and hands copies to a bounded queue; a worker
// thread runs the plugin's decode. A full queue applies the ring's policy and counts;
// the reader never blocks on a consumer.
#ifndef LOUPE_RING_DISPATCHER_HPP
#define LOUPE_RING_DISPATCHER_HPP

#include <atomic>
#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "bounded_queue.hpp"
#include "loupe/abi/host.h"

struct ring_buffer;

namespace loupe {

struct RingStats {
  std::string plugin;
  std::string ring;
  std::uint64_t lost_kernel = 0;   // reserve failures counted by the BPF side
  bool lost_kernel_known = false;  // false when the plugin gave no lost_map_fd
  std::uint64_t received = 0;      // records read from the ring
  std::uint64_t malformed = 0;     // failed the header checks
  std::uint64_t dropped_queue = 0; // queue full, policy drop / count-only
  std::uint64_t coalesced = 0;     // queue full, merged into per-key counts
  std::uint64_t decode_errors = 0; // plugin decode returned an error
  std::uint64_t decoded = 0;       // plugin decode succeeded
  std::uint64_t queue_high_water = 0;
  std::uint64_t max_delay_ns = 0;  // read -> decode, worst seen
  // produced = lost_kernel + received; received = malformed + dropped_queue + coalesced
  //            + decode_errors + decoded + still queued (0 after stop()).
};

class RingDispatcher {
 public:
  struct Options {
    std::chrono::milliseconds max_delivery_delay{20};  // the timed drain period
    std::size_t queue_capacity = 1 << 16;
  };

  RingDispatcher();
  explicit RingDispatcher(Options opts);
  ~RingDispatcher();
  RingDispatcher(const RingDispatcher&) = delete;
  RingDispatcher& operator=(const RingDispatcher&) = delete;

  // Before or after start(). Returns an error text, empty on success.
  std::string add_ring(const std::string& plugin, const loupe_ring_spec& spec);
  void start();
  // Drains what the kernel still holds and what is queued, until `deadline`, then stops.
  void stop(std::chrono::steady_clock::time_point deadline);
  std::vector<RingStats> stats() const;
  std::size_t ring_count() const;

  // The minimal decode, exposed for tests: 0 = ok, else a reason.
  static const char* check_header(const loupe_ring_spec& spec, const void* data, std::size_t len);

 private:
  struct Ring;
  struct Item {
    Ring* ring;
    std::vector<std::uint8_t> bytes;
    std::uint64_t read_ns;
  };
  static int on_sample(void* ctx, void* data, std::size_t len);
  void reader_loop();
  void worker_loop();
  void process(Item& item);

  Options opts_;
  mutable std::mutex mu_;
  std::vector<std::unique_ptr<Ring>> rings_;
  ring_buffer* rb_ = nullptr;
  BoundedQueue<Item> queue_;
  std::thread reader_, worker_;
  std::atomic<bool> stop_reader_{false};
  bool started_ = false;
};

}  // namespace loupe

#endif  // LOUPE_RING_DISPATCHER_HPP
