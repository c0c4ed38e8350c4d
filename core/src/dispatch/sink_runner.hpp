// SPDX-License-Identifier: Apache-2.0
//
// Runs one sink on its own thread behind its own bounded queue, so a slow sink never
// stalls the reader or another sink. Drops (queue full) and consume failures are counted;
// a sink that keeps failing is disabled and the session goes on.
#ifndef LOUPE_DISPATCH_SINK_RUNNER_HPP
#define LOUPE_DISPATCH_SINK_RUNNER_HPP

#include <atomic>
#include <chrono>
#include <future>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <variant>

#include "dispatch/bounded_queue.hpp"
#include "dispatch/owned_record.hpp"
#include "plugins/plugin_instance.hpp"

namespace loupe {

struct SinkStats {
  std::uint64_t delivered = 0;
  std::uint64_t dropped_full = 0;
  std::uint64_t consume_errors = 0;
  std::uint64_t queue_high_water = 0;
  bool disabled = false;
  std::string last_error;
};

class SinkRunner {
 public:
  static constexpr std::size_t kDefaultCapacity = 1 << 16;
  static constexpr std::uint64_t kMaxConsecutiveFailures = 100;

  SinkRunner(PluginInstance& sink, std::size_t capacity = kDefaultCapacity);
  ~SinkRunner();
  SinkRunner(const SinkRunner&) = delete;
  SinkRunner& operator=(const SinkRunner&) = delete;

  void start();
  // Never blocks; false (and counted) when the queue is full or the sink is disabled.
  bool offer(const RecordPtr& rec);
  // Waits until everything queued before it was consumed and flush() ran; false on timeout.
  bool flush(bool is_final, std::chrono::milliseconds timeout);
  // The same, ending a window of a rotating session: the sink writes it into window.dir.
  // False on timeout or when the sink's flush failed (the window lacks its files).
  bool end_window(const WindowEnd& window, std::chrono::milliseconds timeout);
  // Stops the thread after draining what is queued.
  void stop();

  SinkStats stats() const;
  const std::string& name() const { return sink_.name(); }

 private:
  struct FlushRequest {
    bool is_final;
    std::optional<WindowEnd> window;
    std::shared_ptr<std::promise<bool>> done;  // true: flush() succeeded
  };
  // nullopt: not done in time (or the thread is not running); else whether flush() succeeded.
  std::optional<bool> request_flush(FlushRequest req, std::chrono::milliseconds timeout);
  using Item = std::variant<RecordPtr, FlushRequest>;
  void run();
  void handle(Item& item, std::uint64_t* consecutive_failures);

  PluginInstance& sink_;
  BoundedQueue<Item> queue_;
  std::thread thread_;
  std::atomic<bool> disabled_{false};
  std::atomic<std::uint64_t> delivered_{0}, dropped_{0}, errors_{0};
  mutable std::mutex err_mu_;
  std::string last_error_;
};

}  // namespace loupe

#endif  // LOUPE_DISPATCH_SINK_RUNNER_HPP
