// SPDX-License-Identifier: Apache-2.0
#include "dispatch/sink_runner.hpp"
#include "loupe/sdk/thread_name.hpp"

#include <spdlog/spdlog.h>

namespace loupe {

SinkRunner::SinkRunner(PluginInstance& sink, std::size_t capacity)
    : sink_(sink), queue_(capacity) {}

SinkRunner::~SinkRunner() {
  stop();
}

void SinkRunner::start() {
  thread_ = std::thread([this] {
    sdk::name_this_thread("sink:" + name());
    run();
  });
}

bool SinkRunner::offer(const RecordPtr& rec) {
  if (disabled_.load(std::memory_order_relaxed) || !queue_.try_push(rec)) {
    dropped_.fetch_add(1, std::memory_order_relaxed);
    return false;
  }
  return true;
}

bool SinkRunner::flush(bool is_final, std::chrono::milliseconds timeout) {
  return request_flush(FlushRequest{is_final, std::nullopt, nullptr}, timeout).has_value();
}

bool SinkRunner::end_window(const WindowEnd& window, std::chrono::milliseconds timeout) {
  return request_flush(FlushRequest{false, window, nullptr}, timeout).value_or(false);
}

std::optional<bool> SinkRunner::request_flush(FlushRequest req, std::chrono::milliseconds timeout) {
  if (!thread_.joinable()) return std::nullopt;
  req.done = std::make_shared<std::promise<bool>>();
  auto fut = req.done->get_future();
  queue_.push_always(std::move(req));
  if (fut.wait_for(timeout) != std::future_status::ready) return std::nullopt;
  return fut.get();
}

void SinkRunner::stop() {
  queue_.close();
  if (thread_.joinable()) thread_.join();
}

void SinkRunner::run() {
  std::uint64_t consecutive_failures = 0;
  std::deque<Item> batch;
  for (;;) {
    if (!queue_.pop_all(&batch)) return;  // closed and drained
    for (Item& item : batch) handle(item, &consecutive_failures);
    batch.clear();  // the records go now, not after the next wait
  }
}

void SinkRunner::handle(Item& item, std::uint64_t* consecutive_failures) {
  if (auto* flush = std::get_if<FlushRequest>(&item)) {
    bool ok = !disabled_;
    if (ok) {
      try {
        sink_.flush(flush->is_final, flush->window ? &*flush->window : nullptr);
      } catch (const HookError& e) {
        ok = false;
        errors_.fetch_add(1);
        std::lock_guard lock(err_mu_);
        last_error_ = e.what();
        spdlog::error("{}", e.what());
      }
    }
    flush->done->set_value(ok);
    return;
  }
  if (disabled_) {
    dropped_.fetch_add(1);
    return;
  }
  const auto& rec = std::get<RecordPtr>(item);
  int rc = sink_.consume(rec->view());
  if (rc == LOUPE_OK) {
    delivered_.fetch_add(1, std::memory_order_relaxed);
    *consecutive_failures = 0;
    return;
  }
  errors_.fetch_add(1);
  {
    std::lock_guard lock(err_mu_);
    last_error_ = sink_.last_error();
  }
  if (++*consecutive_failures >= kMaxConsecutiveFailures) {
    disabled_ = true;
    spdlog::error("sink '{}' disabled after {} consecutive failures: {}", sink_.name(),
                  *consecutive_failures, sink_.last_error());
  } else if (*consecutive_failures == 1) {
    spdlog::warn("sink '{}' failed to consume a record: {}", sink_.name(), sink_.last_error());
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
