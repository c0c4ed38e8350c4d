// SPDX-License-Identifier: Apache-2.0
//
// HotSpot JVMs as a runtime of the in-kernel unwinder (runtime.hpp), read from the VM's own
// structures: no attach, no signal, no JVM flag. libjvm exports the Serviceability Agent's
// tables (gHotSpotVMStructs, gHotSpotVMTypes: every field offset and type size the VM
// publishes for debuggers), read once per libjvm from the process's memory. From them:
//   - per JVM, where its CodeCache heaps, their segment maps and the template interpreter
//     are, for the walk's step (unwind_hotspot.bpf.h, loupe/hotspot.h);
//   - per Method* the walk met (told through the session's ring, read while the JVM lives,
//     checked against its ConstMethod*): class, method, source file and line table;
//   - per nmethod: its code range, compile id and debug info (PcDescs, scopes, metadata),
//     so a compiled frame names the methods inlined at its pc, innermost first. A pc is
//     attributed as HotSpot's own sampler does (JFR: the first PcDesc after the pc), so
//     shares compare with Java Flight Recorder's.
//
// Limits: x86-64; JDK 17 to 25 layouts (a libjvm whose tables lack a field this reads is
// said once, its frames stay unnamed); an nmethod freed before user space read it keeps
// its frame unnamed (counted); stubs are named by kind, not by stub. Threads: update() on
// the tables' threads, seen() on the ring's reader, name() on any; one lock.
#ifndef LOUPE_RUNTIMES_HOTSPOT_HOTSPOT_FRAMES_HPP
#define LOUPE_RUNTIMES_HOTSPOT_HOTSPOT_FRAMES_HPP

#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <vector>

#include "hotspot/jvm_perf_maps.hpp"
#include "loupe/hotspot.h"
#include "runtimes/runtime.hpp"  // loupe/abi/host.h before loupe/hotspot.h

namespace loupe {

// Offsets and sizes from one libjvm's tables, and the addresses of its statics in one JVM.
struct HotSpotLayout;

class HotSpotFrames final : public Runtime {
 public:
  // `perf_maps`: also ask each JVM of the target for its perf map through its attach
  // listener ([runtimes.hotspot] perf_map; jvm_perf_maps.hpp), for JIT frames the walk leaves.
  explicit HotSpotFrames(std::string proc_root = "/proc", bool perf_maps = false);
  ~HotSpotFrames() override;

  const char* name() const override { return "hotspot_frames"; }
  std::uint32_t id() const override { return LOUPE_RUNTIME_HOTSPOT; }
  loupe_frame_kind frame_kind() const override { return LOUPE_FRAME_JAVA; }
  std::vector<RuntimeMapSpec> maps() const override;
  Status attach(const std::map<std::string, int>& fds) override;
  Update update(std::uint32_t pid, const std::vector<MapsEntry>& maps) override;
  void forget(std::uint32_t pid) override;
  void seen(const loupe_runtime_seen_key& key) override;
  std::uint32_t name(std::uint32_t pid, std::uint64_t frame, Symbolizer::RuntimeName* out,
                     std::uint32_t max) override;
  void report_health(HealthReport& health) const override;
  void tick(const std::vector<pid_t>& processes) override { perf_maps_.tick(processes); }
  void before_final_report(const std::vector<pid_t>& processes) override {
    perf_maps_.before_final_report(processes);
  }

  // What a JVM's method is, as the session read it.
  struct Method {
    std::string name;                                            // java.util.HashMap.getNode
    std::string file;                                            // HashMap.java
    std::vector<std::pair<std::uint32_t, std::uint32_t>> lines;  // (bci, line), by bci
    std::uint32_t line_at(std::uint32_t bci) const;
  };
  struct Scope {
    const Method* method;
    std::uint32_t bci;
  };
  struct NMethod {
    std::uint64_t code_begin = 0, code_end = 0;
    std::uint32_t compile_id = 0;
    const Method* method = nullptr;
    // PcDescs: (pc offset from code begin, its scopes innermost first).
    std::vector<std::pair<std::uint32_t, std::vector<Scope>>> pcs;
  };

  // Reads the nmethod at `blob` of `pid`, or null (its compile id's low 25 bits differ:
  // freed and reused; kAnyCompileId takes the one it has).
  static constexpr std::uint32_t kAnyCompileId = UINT32_MAX;
  const NMethod* read_nmethod(std::uint32_t pid, std::uint64_t blob, std::uint32_t compile_id);
  // Every compiled Java method's CodeBlob in pid's CodeCache now, by walking its heaps'
  // blocks as HotSpot does (CodeHeap::next_block): for tests and diagnostics.
  std::vector<std::uint64_t> nmethod_blobs(std::uint32_t pid);
  // The proc entry the walk reads, as last written for `pid`.
  bool entry(std::uint32_t pid, loupe_hotspot_proc* out) const;

 private:
  struct Jvm;
  Jvm* jvm(std::uint32_t pid);
  const Method* read_method(Jvm& j, std::uint64_t method, std::uint64_t token, bool check);
  const NMethod* read_nmethod_locked(Jvm& j, std::uint64_t blob, std::uint32_t compile_id);

  std::string proc_root_;
  JvmPerfMaps perf_maps_;
  int procs_fd_ = -1;
  mutable std::mutex mu_;
  std::map<std::string, std::shared_ptr<const HotSpotLayout>> layouts_;  // by libjvm path
  std::map<std::uint32_t, std::unique_ptr<Jvm>> jvms_;
  std::set<std::string> unsupported_;  // libjvm paths and why
  std::uint64_t jvms_seen_ = 0, methods_read_ = 0, nmethods_read_ = 0, read_failed_ = 0, stale_ = 0,
                unnamed_ = 0, write_errors_ = 0;
};

}  // namespace loupe

#endif  // LOUPE_RUNTIMES_HOTSPOT_HOTSPOT_FRAMES_HPP
