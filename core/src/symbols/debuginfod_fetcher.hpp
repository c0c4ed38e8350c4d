// SPDX-License-Identifier: Apache-2.0
//
// Separate debug files from debuginfod servers (DEBUGINFOD_URLS), for modules that ship
// without .symtab and have no /usr/lib/debug file: a stripped library's static functions
// then get their names instead of `[fn@0x...]`.
//
// Never on the hot path: want() only queues a build-id; one worker thread asks the
// servers, each lookup bounded in time, and each build-id is asked at most once per
// session. The symbolizer takes what arrived (ready()) before its lookups and reads the
// modules again with the fetched file. libdebuginfod keeps its own cache
// (DEBUGINFOD_CACHE_PATH, default ~/.cache/debuginfod_client), so a second session finds
// the file there at once.
//
// Thread-safe.
#ifndef LOUPE_SYMBOLS_DEBUGINFOD_FETCHER_HPP
#define LOUPE_SYMBOLS_DEBUGINFOD_FETCHER_HPP

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

namespace loupe {

class DebuginfodFetcher {
 public:
  struct Counters {
    std::uint64_t requested = 0;  // build-ids asked for
    std::uint64_t fetched = 0;    // debug file found (server or client cache)
    std::uint64_t not_found = 0;  // no server had it
    std::uint64_t timed_out = 0;  // the lookup ran out of its time bound
    std::uint64_t failed = 0;     // other errors (connection refused, ...)
    std::uint64_t dropped = 0;    // not queued: the queue was full
  };

  // `urls` as DEBUGINFOD_URLS (space-separated); nullptr when empty or libdebuginfod
  // cannot start a client.
  static std::unique_ptr<DebuginfodFetcher> start(const std::string& urls,
                                                  std::chrono::milliseconds per_lookup);
  ~DebuginfodFetcher();
  DebuginfodFetcher(const DebuginfodFetcher&) = delete;
  DebuginfodFetcher& operator=(const DebuginfodFetcher&) = delete;

  // Queues `build_id` (lowercase hex) once; returns at once.
  void want(const std::string& build_id);
  // The debug file fetched for `build_id`, "" when none (yet).
  std::string path_for(const std::string& build_id) const;
  // Build-ids whose file arrived since the last call.
  std::vector<std::string> take_ready();
  Counters counters() const;

 private:
  DebuginfodFetcher() = default;
  void run();

  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::deque<std::string> queue_;
  std::map<std::string, std::string> asked_;  // build-id -> fetched path ("" = none)
  std::vector<std::string> ready_;
  Counters counters_;
  std::chrono::milliseconds per_lookup_{5000};
  bool stop_ = false;
  void* client_ = nullptr;  // debuginfod_client*, used by the worker only
  std::thread worker_;
};

}  // namespace loupe

#endif  // LOUPE_SYMBOLS_DEBUGINFOD_FETCHER_HPP
