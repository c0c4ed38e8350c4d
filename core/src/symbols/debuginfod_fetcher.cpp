// SPDX-License-Identifier: Apache-2.0
#include "symbols/debuginfod_fetcher.hpp"
#include "loupe/sdk/thread_name.hpp"

#include <elfutils/debuginfod.h>
#include <spdlog/spdlog.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>

namespace loupe {

namespace {

constexpr std::size_t kMaxQueued = 1024;

// The lookup's deadline travels in the client's user data; a non-zero return from the
// progress callback makes libdebuginfod give up (-ECANCELED).
struct Deadline {
  std::chrono::steady_clock::time_point at;
};

int progress(debuginfod_client* c, long, long) {
  auto* d = static_cast<Deadline*>(debuginfod_get_user_data(c));
  return d && std::chrono::steady_clock::now() > d->at ? 1 : 0;
}

}  // namespace

std::unique_ptr<DebuginfodFetcher> DebuginfodFetcher::start(const std::string& urls,
                                                            std::chrono::milliseconds per_lookup) {
  if (urls.find_first_not_of(' ') == std::string::npos) return nullptr;
  // The client reads its servers from the environment, and its own time bound too:
  // the progress callback is not called while a server accepts and stays silent, so
  // curl's timeout (whole seconds) is set to the bound unless the user chose one.
  ::setenv("DEBUGINFOD_URLS", urls.c_str(), 1);
  const long secs = std::max<long>(1, static_cast<long>((per_lookup.count() + 999) / 1000));
  ::setenv("DEBUGINFOD_TIMEOUT", std::to_string(secs).c_str(), 0);
  debuginfod_client* c = debuginfod_begin();
  if (!c) {
    spdlog::warn(
        "debuginfod: cannot start a client; separate debug files come from "
        "/usr/lib/debug only");
    return nullptr;
  }
  debuginfod_set_progressfn(c, progress);
  std::unique_ptr<DebuginfodFetcher> f(new DebuginfodFetcher());
  f->client_ = c;
  f->per_lookup_ = per_lookup;
  f->worker_ = std::thread([p = f.get()] {
    sdk::name_this_thread("loupe-debuginfo");
    p->run();
  });
  spdlog::info("debuginfod: asking {} for debug files of stripped modules ({} ms per lookup)", urls,
               per_lookup.count());
  return f;
}

DebuginfodFetcher::~DebuginfodFetcher() {
  {
    std::lock_guard lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  // A lookup in progress ends at its deadline at the latest.
  if (worker_.joinable()) worker_.join();
  if (client_) debuginfod_end(static_cast<debuginfod_client*>(client_));
}

void DebuginfodFetcher::want(const std::string& build_id) {
  if (build_id.empty()) return;
  {
    std::lock_guard lock(mu_);
    if (!asked_.emplace(build_id, std::string()).second) return;
    ++counters_.requested;
    if (queue_.size() >= kMaxQueued) {
      ++counters_.dropped;
      return;
    }
    queue_.push_back(build_id);
  }
  cv_.notify_one();
}

std::string DebuginfodFetcher::path_for(const std::string& build_id) const {
  std::lock_guard lock(mu_);
  auto it = asked_.find(build_id);
  return it == asked_.end() ? std::string() : it->second;
}

std::vector<std::string> DebuginfodFetcher::take_ready() {
  std::lock_guard lock(mu_);
  return std::exchange(ready_, {});
}

DebuginfodFetcher::Counters DebuginfodFetcher::counters() const {
  std::lock_guard lock(mu_);
  return counters_;
}

void DebuginfodFetcher::run() {
  auto* c = static_cast<debuginfod_client*>(client_);
  for (;;) {
    std::string id;
    {
      std::unique_lock lock(mu_);
      cv_.wait(lock, [&] { return stop_ || !queue_.empty(); });
      if (stop_) return;
      id = std::move(queue_.front());
      queue_.pop_front();
    }
    Deadline d{std::chrono::steady_clock::now() + per_lookup_};
    debuginfod_set_user_data(c, &d);
    char* path = nullptr;
    const auto t0 = std::chrono::steady_clock::now();
    // A build-id length of 0 means: a hex string.
    int fd =
        debuginfod_find_debuginfo(c, reinterpret_cast<const unsigned char*>(id.c_str()), 0, &path);
    const auto ms =
        std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - t0)
            .count();
    debuginfod_set_user_data(c, nullptr);
    std::lock_guard lock(mu_);
    if (fd >= 0) {
      ::close(fd);
      asked_[id] = path ? path : "";
      ++counters_.fetched;
      ready_.push_back(id);
      spdlog::info("debuginfod: {} -> {} ({} ms)", id, path ? path : "?", ms);
    } else if (fd == -ETIME || fd == -ETIMEDOUT || fd == -ECANCELED ||
               std::chrono::steady_clock::now() > d.at) {
      // A lookup the progress callback cancelled reports ENOENT: the deadline tells.
      ++counters_.timed_out;
      spdlog::info("debuginfod: {} not fetched within {} ms", id, per_lookup_.count());
    } else if (fd == -ENOENT) {
      ++counters_.not_found;
      spdlog::debug("debuginfod: no server has {} ({} ms)", id, ms);
    } else {
      ++counters_.failed;
      spdlog::info("debuginfod: {}: {} ({} ms)", id, std::strerror(-fd), ms);
    }
    std::free(path);
  }
}

}  // namespace loupe
