// SPDX-License-Identifier: Apache-2.0
//
// A JIT's symbol file in perf's format (/tmp/perf-PID.map: "START SIZE name" per line,
// hex, written by V8/Node --perf-basic-prof, the JVM's perf-map-agent, .NET, LuaJIT...).
// The file grows while the JIT runs, so it is re-read whenever its size or mtime changes.
#ifndef LOUPE_CORE_PERF_MAP_HPP
#define LOUPE_CORE_PERF_MAP_HPP

#include <cstdint>
#include <ctime>
#include <string>
#include <string_view>
#include <vector>

namespace loupe {

class PerfMap {
 public:
  explicit PerfMap(std::string path) : path_(std::move(path)) {}

  // Re-reads the file when it changed since the last call. Returns false when it is absent.
  bool refresh();

  struct Hit {
    std::string_view name;  // valid until the next refresh()
    std::uint64_t offset;
    // The owner's interned copy of the name, cached per entry until the next re-read.
    const char** interned;
  };
  // Call refresh() first. Later lines win over earlier ones for the same range, as JITs
  // append a new entry when they recompile code at a recycled address.
  bool lookup(std::uint64_t addr, Hit* hit) const;

  const std::string& path() const { return path_; }
  std::size_t size() const { return entries_.size(); }

 private:
  struct Entry {
    std::uint64_t start;
    std::uint64_t size;
    std::uint32_t name;  // offset into names_
    std::uint32_t line;  // position in the file, for "later wins"
    mutable const char* interned;
  };
  void parse(const std::string& text);

  std::string path_;
  bool present_ = false;
  std::int64_t file_size_ = -1;
  timespec mtime_{};
  std::vector<Entry> entries_;
  std::string names_;
};

}  // namespace loupe

#endif  // LOUPE_CORE_PERF_MAP_HPP
