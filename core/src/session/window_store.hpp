// SPDX-License-Identifier: Apache-2.0
//
// The windows of a rotating session ([session] rotate): each window's files are written by
// the sinks into a hidden directory, then published whole under
// <output_dir>/windows/<start time, UTC>/ with a window.json saying its span and what it
// lacks, and the oldest windows go when `retain` or `retain_bytes` is passed. A store that
// picks windows up (a cron job, a Pyroscope or Parca uploader) lists the directory and never
// sees a window half written: a directory's name appears only once its files are complete.
//
// Session thread only.
#ifndef LOUPE_SESSION_WINDOW_STORE_HPP
#define LOUPE_SESSION_WINDOW_STORE_HPP

#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include "plugins/plugin_instance.hpp"
#include "util/result.hpp"

namespace loupe {

// The session's output directory, made (with its parents) and closed to others (0700):
// profiles name processes, paths and stacks.
Status make_output_dir(const std::string& dir);

class WindowStore {
 public:
  struct Counters {
    std::uint64_t written = 0;     // windows published
    std::uint64_t incomplete = 0;  // published without some sink's files (its flush failed)
    std::uint64_t pruned = 0;      // removed by retain / retain_bytes
    std::uint64_t kept = 0;        // on disk now
    std::uint64_t kept_bytes = 0;
    std::uint64_t errors = 0;  // a window that could not be created, published or removed
    std::string last_error;
  };

  WindowStore(std::filesystem::path output_dir, std::size_t retain, std::uint64_t retain_bytes)
      : root_(std::move(output_dir) / "windows"), retain_(retain), retain_bytes_(retain_bytes) {}

  // At the start: windows a crashed run left unpublished are removed (never complete).
  void clean_partial();
  // A hidden directory for the window [start_ns, end_ns] (CLOCK_REALTIME), for the sinks to
  // fill; empty `dir` when it could not be made (counted).
  WindowEnd begin(std::uint64_t start_ns, std::uint64_t end_ns);
  // Publishes the window under its final name (window.json names `missing`: the sinks
  // whose files it lacks), then prunes. Returns the published path ("" on failure).
  std::filesystem::path publish(const WindowEnd& w, const std::vector<std::string>& missing);

  const Counters& counters() const { return c_; }
  const std::filesystem::path& root() const { return root_; }

  // "20261127T041500.123Z": sorts as time does.
  static std::string name_of(std::uint64_t wall_ns);

 private:
  void prune();
  void fail(const std::string& what);

  std::filesystem::path root_;
  std::size_t retain_;
  std::uint64_t retain_bytes_;
  Counters c_;
};

}  // namespace loupe

#endif  // LOUPE_SESSION_WINDOW_STORE_HPP
