// SPDX-License-Identifier: Apache-2.0
//
// Fan-out of records to every sink runner. Publishing never blocks: each sink's own queue
// decides, and counts, what it cannot take.
#ifndef LOUPE_DISPATCH_RECORD_BUS_HPP
#define LOUPE_DISPATCH_RECORD_BUS_HPP

#include <atomic>
#include <mutex>
#include <vector>

#include "dispatch/owned_record.hpp"
#include "dispatch/sink_runner.hpp"

namespace loupe {

class RecordBus {
 public:
  void attach(SinkRunner* sink) {
    std::lock_guard lock(mu_);
    sinks_.push_back(sink);
  }
  void publish(const RecordPtr& rec) {
    published_.fetch_add(1, std::memory_order_relaxed);
    std::lock_guard lock(mu_);
    for (auto* s : sinks_) s->offer(rec);
  }
  void count_rejected() { rejected_.fetch_add(1, std::memory_order_relaxed); }
  std::uint64_t published() const { return published_.load(); }
  std::uint64_t rejected() const { return rejected_.load(); }

 private:
  std::mutex mu_;
  std::vector<SinkRunner*> sinks_;
  std::atomic<std::uint64_t> published_{0}, rejected_{0};
};

}  // namespace loupe

#endif  // LOUPE_DISPATCH_RECORD_BUS_HPP
