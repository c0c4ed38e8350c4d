// SPDX-License-Identifier: Apache-2.0
#include "dispatch/sink_runner.hpp"

#include <spdlog/spdlog.h>

namespace loupe {

SinkRunner::SinkRunner(PluginInstance& sink, std::size_t capacity)
    : sink_(sink), queue_(capacity) {}

SinkRunner::~SinkRunner() {
  stop();
}

void SinkRunner::start() {
  thread_ = std::thread([this] { run(); });
}

bool SinkRunner::offer(const RecordPtr& rec) {
  if (disabled_.load(std::memory_order_relaxed) || !queue_.try_push(rec)) {
    dropped_.fetch_add(1, std::memory_order_relaxed);
    return false;
  }
  return true;
}

bool SinkRunner::flush(bool is_final, std::chrono::milliseconds timeout) {
  if (!thread_.joinable()) return false;
  auto done = std::make_shared<std::promise<void>>();
  auto fut = done->get_future();
  queue_.push_always(FlushRequest{is_final, done});
  return fut.wait_for(timeout) == std::future_status::ready;
}

void SinkRunner::stop() {
  queue_.close();
  if (thread_.joinable()) thread_.join();
}

void SinkRunner::run() {
  std::uint64_t consecutive_failures = 0;
  for (;;) {
    auto item = queue_.pop(std::chrono::milliseconds(200));
    if (!item) {
      if (queue_.closed() && queue_.size() == 0) return;
      continue;
    }
    if (auto* flush = std::get_if<FlushRequest>(&*item)) {
      if (!disabled_) {
        try {
          sink_.flush(flush->is_final);
        } catch (const HookError& e) {
          errors_.fetch_add(1);
          std::lock_guard lock(err_mu_);
          last_error_ = e.what();
          spdlog::error("{}", e.what());
        }
      }
      flush->done->set_value();
      continue;
    }
    if (disabled_) {
      dropped_.fetch_add(1);
      continue;
    }
    const auto& rec = std::get<RecordPtr>(*item);
    int rc = sink_.consume(rec->view());
    if (rc == LOUPE_OK) {
      delivered_.fetch_add(1, std::memory_order_relaxed);
      consecutive_failures = 0;
      continue;
    }
    errors_.fetch_add(1);
    {
      std::lock_guard lock(err_mu_);
      last_error_ = sink_.last_error();
    }
    if (++consecutive_failures >= kMaxConsecutiveFailures) {
      disabled_ = true;
      spdlog::error("sink '{}' disabled after {} consecutive failures: {}", sink_.name(),
                    consecutive_failures, sink_.last_error());
    } else if (consecutive_failures == 1) {
      spdlog::warn("sink '{}' failed to consume a record: {}", sink_.name(), sink_.last_error());
    }
  }
}

SinkStats SinkRunner::stats() const {
  SinkStats s;
  s.delivered = delivered_.load();
  s.dropped_full = dropped_.load();
  s.consume_errors = errors_.load();
  s.queue_high_water = queue_.high_water();
  s.disabled = disabled_.load();
  std::lock_guard lock(err_mu_);
  s.last_error = last_error_;
  return s;
}

}  // namespace loupe
