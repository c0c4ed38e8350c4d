// SPDX-License-Identifier: Apache-2.0
//
// A JIT's symbol file in perf's format (/tmp/perf-PID.map: "START SIZE name" per line,
// hex, written by V8/Node --perf-basic-prof, the JVM's perf-map-agent, .NET, LuaJIT...).
// The file grows while the JIT runs (or is rewritten whole: the JVM's Compiler.perfmap),
// so it is re-read whenever its size or mtime changes.
#ifndef LOUPE_SYMBOLS_PERF_MAP_HPP
#define LOUPE_SYMBOLS_PERF_MAP_HPP

#include <cstdint>
#include <ctime>
#include <string>
#include <string_view>
#include <vector>

namespace loupe {

// Where a process's perf map is. The runtime writes <dir>/perf-<its own pid>.map in its own
// mount namespace: inside a container that is another file, under another pid, than ours.
struct PerfMapLocation {
  std::string path;  // where loupe reads it
  std::string name;  // as the process names it (the frames' module)
};
// `proc_dir` is "<proc_root>/<pid>". The host's <dir> when the process sees the same
// directory (the file then outlives the process, for reports after its exit), else the
// one under <proc_dir>/root; pid and host <dir> when the process is gone.
PerfMapLocation locate_perf_map(std::uint32_t pid, const std::string& proc_dir,
                                const std::string& dir);
// The pid the process has in its own pid namespace (the last of "NSpid:" in its status);
// `pid` when the status cannot be read or has no such line (kernels before 4.1).
std::uint32_t namespace_pid(std::uint32_t pid, const std::string& proc_dir);

class PerfMap {
 public:
  explicit PerfMap(std::string path, std::string name = {})
      : path_(std::move(path)), name_(name.empty() ? path_ : std::move(name)) {}

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
  const std::string& name() const { return name_; }
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
  std::string name_;
  bool present_ = false;
  std::int64_t file_size_ = -1;
  timespec mtime_{};
  std::vector<Entry> entries_;
  std::string names_;
};

}  // namespace loupe

#endif  // LOUPE_SYMBOLS_PERF_MAP_HPP
