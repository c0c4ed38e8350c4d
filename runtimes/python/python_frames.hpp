// SPDX-License-Identifier: Apache-2.0
//
// The host side of the in-kernel unwinder's Python frames (bpf/include/loupe/unwind.bpf.h):
// finds the CPython each process of the target runs (its binary or libpython in its maps),
// writes what the walk needs (the thread-state key, the evaluation loop's ranges, the
// version's layout) into every consumer's loupe_python_procs, reads each code object the
// walks report while its process lives, and names the tagged frames for the symbolizer
// (`qualname`, file and line), also after the process is gone.
//
// Limits: glibc's thread descriptor (the first 32 pthread keys); x86-64; a code object
// freed and another allocated at its address is told apart by its first line and name
// (the walk's token), and its frames sampled before then take the newer one's name.
#ifndef LOUPE_RUNTIMES_PYTHON_PYTHON_FRAMES_HPP
#define LOUPE_RUNTIMES_PYTHON_PYTHON_FRAMES_HPP

#include <bpf/libbpf.h>

#include <cstdint>
#include <map>
#include <mutex>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "python/python_runtime.hpp"
#include "runtimes/runtime.hpp"  // loupe/abi/host.h before loupe/unwind.h
#include "util/result.hpp"

namespace loupe {

class PythonFrames final : public Runtime {
 public:
  struct Counters {
    std::uint64_t processes = 0;      // interpreter processes whose frames are walked
    std::uint64_t codes_read = 0;     // code objects named
    std::uint64_t code_bytes = 0;     // what their names, files and line tables hold
    std::uint64_t codes_failed = 0;   // reported, but unreadable (the process was gone)
    std::uint64_t codes_dropped = 0;  // not kept: kMaxCodes were (a long system-wide run)
    std::uint64_t write_errors = 0;   // entries the kernel refused (1024 interpreters)
    std::uint64_t names_missed = 0;   // frames named by address only (process gone first)
    // CPython versions found without a layout, e.g. "3.9.2 (/usr/bin/python3.9, pid 12)".
    std::vector<std::string> unsupported;
  };
  struct Name {
    std::string qualname, file;
    std::uint32_t line = 0;
  };

  explicit PythonFrames(std::string proc_root = "/proc") : proc_root_(std::move(proc_root)) {}
  ~PythonFrames() override;
  PythonFrames(const PythonFrames&) = delete;
  PythonFrames& operator=(const PythonFrames&) = delete;

  // Runtime: CPython, its loupe_python_procs; code objects told through the session's
  // runtime ring.
  const char* name() const override { return "python_frames"; }
  std::uint32_t id() const override { return LOUPE_RUNTIME_PYTHON; }
  loupe_frame_kind frame_kind() const override { return LOUPE_FRAME_PYTHON; }
  std::vector<RuntimeMapSpec> maps() const override;
  Status attach(const std::map<std::string, int>& fds) override;
  Update update(std::uint32_t pid, const std::vector<MapsEntry>& maps) override;
  void forget(std::uint32_t pid) override;
  void seen(const loupe_runtime_seen_key& key) override { seen(key.tgid, key.ptr, key.token); }
  std::uint32_t name(std::uint32_t pid, std::uint64_t frame, Symbolizer::RuntimeName* out,
                     std::uint32_t max) override;
  void report_health(HealthReport& health) const override;

  bool attached() const { return !consumers_.empty(); }
  // Reads the code objects the walks reported since the last call. Any thread.
  void poll();
  // The name of a tagged frame (LOUPE_PYTHON_IS_FRAME) of `pid`. Any thread.
  // The ring is read first: a code object freed and another allocated at its address (a
  // module's body after its import) is told there before any stack of the new one, so the
  // new one's frames never take the old one's name. A code object the ring has not told
  // yet is read then, from the process.
  bool name_frame(std::uint32_t pid, std::uint64_t frame, Name* out);
  Counters counters() const;

 private:
  struct Consumer {
    int procs_fd, codes_fd;
    ring_buffer* ring;
  };
  struct Code {
    PythonCode code;
    const PythonLayout* layout;
    std::uint64_t token;  // as the walk read it (loupe_runtime_seen_key)
  };
  bool update_entry(std::uint32_t pid, const std::vector<MapsEntry>& maps);
  void seen(std::uint32_t pid, std::uint64_t code, std::uint64_t token);
  const Code* read_and_keep(std::unique_lock<std::mutex>& lock, std::uint32_t pid,
                            std::uint64_t code, std::uint64_t token);

  std::string proc_root_;
  std::vector<Consumer> consumers_;  // set before any naming thread starts
  std::mutex ring_mu_;               // one reader of the rings at a time (libbpf's rule)
  PythonRuntimeCache runtimes_;
  // Walked, with their layout: written on the session's thread, read by name() on any.
  std::map<std::uint32_t, const PythonLayout*> processes_;
  std::uint64_t processes_seen_ = 0;
  std::set<std::string> unsupported_;
  mutable std::mutex mu_;  // processes_, codes_ and the counters
  std::map<std::pair<std::uint32_t, std::uint64_t>, Code> codes_;
  std::uint64_t codes_failed_ = 0, codes_dropped_ = 0, write_errors_ = 0, names_missed_ = 0;
  // Names kept for the run (a few hundred bytes each): bounded, the rest counted.
  static constexpr std::size_t kMaxCodes = 262144;
};

}  // namespace loupe

#endif  // LOUPE_RUNTIMES_PYTHON_PYTHON_FRAMES_HPP
