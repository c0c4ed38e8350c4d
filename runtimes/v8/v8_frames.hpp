// SPDX-License-Identifier: Apache-2.0
//
// V8 (Node.js) as a runtime of the in-kernel unwinder (runtime.hpp), read from the VM's own
// structures: no --perf-basic-prof, no restart, no signal. node exports V8's postmortem
// metadata (the v8dbg_* symbols, made for debuggers: frame slots, field offsets, instance
// types), read once per binary from the process's memory. From it:
//   - per process, the entry the walk's step reads (unwind_v8.bpf.h, loupe/v8.h): where the
//     embedded builtins are, the frame slots, the offsets that lead from a frame to its
//     JSFunction and SharedFunctionInfo;
//   - per SharedFunctionInfo the walk met (told through the session's ring, read while the
//     process lives): the function's name as V8's own stack traces give it (its name, else
//     the name V8 inferred: `Module._compile`), its script, its first line and, for
//     interpreted frames, the line of each bytecode offset (the bytecode's source position
//     table and the script's line ends).
//
// Limits: x86-64; builds without pointer compression (Node's); V8 11 (Node 20) for the
// tiers, any version the metadata describes for names; an optimized frame (Maglev,
// TurboFan) of V8 11 names the functions inlined at its pc as frames of their own, from the
// code's source positions and deoptimization data read at first sight; on-stack-replaced
// code and other versions' optimized code name the function whose frame it is (inlined
// callees' time is then its own); a SharedFunctionInfo moved by the garbage collector before it was
// read is named by what then lives at its address, or not at all (counted). Threads: update() on
// the tables' threads, seen() on the ring's reader, name() on any; one lock.
#ifndef LOUPE_RUNTIMES_V8_V8_FRAMES_HPP
#define LOUPE_RUNTIMES_V8_V8_FRAMES_HPP

#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <vector>

#include "loupe/v8.h"
#include "runtimes/runtime.hpp"  // loupe/abi/host.h before loupe/v8.h

namespace loupe {

// One binary's V8: its metadata, the entry's offsets and what naming reads.
struct V8Layout;

class V8Frames final : public Runtime {
 public:
  // `enabled` false ([runtimes.v8] frames = false): no process is read, JIT frames stay
  // by address (or named by a perf map node writes).
  explicit V8Frames(std::string proc_root = "/proc", bool enabled = true);
  ~V8Frames() override;

  const char* name() const override { return "v8_frames"; }
  std::uint32_t id() const override { return LOUPE_RUNTIME_V8; }
  loupe_frame_kind frame_kind() const override { return LOUPE_FRAME_JS; }
  std::vector<RuntimeMapSpec> maps() const override;
  Status attach(const std::map<std::string, int>& fds) override;
  Update update(std::uint32_t pid, const std::vector<MapsEntry>& maps) override;
  void forget(std::uint32_t pid) override;
  void seen(const loupe_runtime_seen_key& key) override;
  std::uint32_t name(std::uint32_t pid, std::uint64_t frame, Symbolizer::RuntimeName* out,
                     std::uint32_t max) override;
  void report_health(HealthReport& health) const override;

  // What a function is, as read from its SharedFunctionInfo.
  struct Function {
    std::string name;  // "hotA", "Module._compile", "<anonymous>"
    std::string file;  // the script's name: a path, or node:internal/...
    std::uint32_t first_line = 0;
    std::uint64_t script = 0;  // its Script (tagged), whose line ends the process holds
    // (bytecode offset, line), by offset: an interpreted frame's line.
    std::vector<std::pair<std::uint32_t, std::uint32_t>> lines;
    std::uint32_t line_at(std::uint32_t offset) const;
  };
  // Reads the SharedFunctionInfo at `sfi` (untagged) of `pid` now; null when it is not
  // one (gone, moved) or the process runs no V8 this knows.
  const Function* read_function(std::uint32_t pid, std::uint64_t sfi);
  // The entry the walk reads, as last written for `pid`.
  bool entry(std::uint32_t pid, loupe_v8_proc* out) const;
  // The V8 version of `pid`'s binary ("11.3.244"), empty when unknown.
  std::string version(std::uint32_t pid) const;

 private:
  struct Process;
  const Function* read_locked(Process& p, std::uint32_t pid, std::uint64_t sfi);
  void read_code_locked(Process& p, std::uint32_t pid, std::uint64_t code, std::uint64_t sfi);
  std::uint32_t name_code(std::uint32_t pid, std::uint64_t payload, Symbolizer::RuntimeName* out,
                          std::uint32_t max);

  std::string proc_root_;
  bool enabled_ = true;
  int procs_fd_ = -1;
  mutable std::mutex mu_;
  // By binary path: its layout, or null with the reason in unsupported_.
  std::map<std::string, std::shared_ptr<const V8Layout>> layouts_;
  std::map<std::uint32_t, std::unique_ptr<Process>> procs_;
  std::set<std::string> unsupported_;
  std::set<std::uint32_t> by_perf_map_;  // live processes named by the map they write
  std::uint64_t processes_seen_ = 0, functions_read_ = 0, read_failed_ = 0, unnamed_ = 0,
                write_errors_ = 0, codes_read_ = 0, codes_failed_ = 0, inlined_named_ = 0,
                perf_map_processes_ = 0;
};

}  // namespace loupe

#endif  // LOUPE_RUNTIMES_V8_V8_FRAMES_HPP
