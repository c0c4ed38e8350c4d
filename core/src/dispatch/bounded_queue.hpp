// SPDX-License-Identifier: Apache-2.0
//
// A bounded multi-producer queue whose producers never block: a full queue refuses the
// item and the caller counts the drop. One consumer waits with a timeout.
//
// The consumer takes what is queued in batches (pop_all): taken one at a time, each
// record a report publishes woke the sink's thread for that record alone (a futex wake on
// the session thread and two switches per record and sink: under process churn, thousands
// of per-process stack records at every report, 9 % of the session thread's time). A
// batch in the consumer's hands no longer counts against the capacity.
#ifndef LOUPE_DISPATCH_BOUNDED_QUEUE_HPP
#define LOUPE_DISPATCH_BOUNDED_QUEUE_HPP

#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <deque>
#include <mutex>
#include <optional>

namespace loupe {

template <typename T>
class BoundedQueue {
 public:
  explicit BoundedQueue(std::size_t capacity) : capacity_(capacity) {}

  bool try_push(T item) {
    {
      std::lock_guard lock(mu_);
      if (closed_ || items_.size() >= capacity_) return false;
      items_.push_back(std::move(item));
      if (items_.size() > high_water_) high_water_ = items_.size();
    }
    cv_.notify_one();
    return true;
  }
  // For control items (flush markers) that must not be dropped: may exceed capacity.
  void push_always(T item) {
    {
      std::lock_guard lock(mu_);
      items_.push_back(std::move(item));
    }
    cv_.notify_one();
  }
  // Empty optional on timeout, or when closed and drained.
  std::optional<T> pop(std::chrono::milliseconds timeout) {
    std::unique_lock lock(mu_);
    if (!cv_.wait_for(lock, timeout, [&] { return !items_.empty() || closed_; }))
      return std::nullopt;
    if (items_.empty()) return std::nullopt;
    T item = std::move(items_.front());
    items_.pop_front();
    return item;
  }
  // Every queued item, in order, appended to `out` (which the caller empties): false on
  // timeout, or when closed and drained. Producers that push while the consumer works
  // through a batch wake nobody (nobody waits).
  bool pop_all(std::chrono::milliseconds timeout, std::deque<T>* out) {
    std::unique_lock lock(mu_);
    if (!cv_.wait_for(lock, timeout, [&] { return !items_.empty() || closed_; })) return false;
    return take_all(out);
  }
  // The same, without a timeout: wakes only for an item or close(), so an idle consumer
  // costs nothing (a timed wait was 5 wake-ups a second of each sink's thread).
  bool pop_all(std::deque<T>* out) {
    std::unique_lock lock(mu_);
    cv_.wait(lock, [&] { return !items_.empty() || closed_; });
    return take_all(out);
  }
  void close() {
    {
      std::lock_guard lock(mu_);
      closed_ = true;
    }
    cv_.notify_all();
  }
  bool closed() const {
    std::lock_guard lock(mu_);
    return closed_;
  }
  std::size_t size() const {
    std::lock_guard lock(mu_);
    return items_.size();
  }
  std::size_t high_water() const {
    std::lock_guard lock(mu_);
    return high_water_;
  }
  std::size_t capacity() const { return capacity_; }

 private:
  bool take_all(std::deque<T>* out) {  // mu_ held
    if (items_.empty()) return false;
    if (out->empty()) {
      out->swap(items_);
    } else {
      for (T& item : items_) out->push_back(std::move(item));
      items_.clear();
    }
    return true;
  }
  const std::size_t capacity_;
  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::deque<T> items_;
  std::size_t high_water_ = 0;
  bool closed_ = false;
};

}  // namespace loupe

#endif  // LOUPE_DISPATCH_BOUNDED_QUEUE_HPP
