// SPDX-License-Identifier: Apache-2.0
//
// The session's one in-kernel unwinder: the BPF maps every plugin's walk shares (unwind
// rows, process and file entries, each runtime's entries, the LRU and ring of first
// sightings), created once before any plugin is set up and named to the plugins in
// loupe_session_info.unwind_maps, which they reuse by name (as the target tree map is
// shared). One copy of the rows for the session, however many plugins take stacks: the
// agent profile (two plugins, system-wide) held two 24 MiB copies before.
//
// It keeps the tables' host (ProcessTables) writing into its maps as the first consumer, the
// runtimes (runtime.hpp) writing their entries, and the ring read: each first sighting goes
// to the runtime whose id it carries. Frames are named through it by runtime id.
//
// Limits: a kernel that refuses a map (no BPF_MAP_TYPE_RINGBUF before 5.8, a memlock
// limit) leaves the session without it: every plugin then keeps its own copy (said once).
// Threads: create() and describe() on the session's thread before plugins start; poll() on
// the tables' refresh; name() on any thread.
#ifndef LOUPE_UNWIND_SESSION_UNWINDER_HPP
#define LOUPE_UNWIND_SESSION_UNWINDER_HPP

#include <bpf/libbpf.h>

#include <atomic>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "loupe/abi/host.h"
#include "runtimes/runtime.hpp"
#include "symbols/process_maps.hpp"
#include "util/result.hpp"
#include "util/unique_fd.hpp"

namespace loupe {

class HealthReport;
class ProcessTables;
class ProcessWatch;

class SessionUnwinder {
 public:
  // `rows`: the tables' size ([session] unwind_rows, resolved). A process a runtime was
  // not ready for is read again through `watch` (the session's, outliving this).
  SessionUnwinder(ProcessTables& tables, ProcessWatch& watch,
                  std::vector<std::unique_ptr<Runtime>> runtimes, std::uint32_t rows);
  ~SessionUnwinder();
  SessionUnwinder(const SessionUnwinder&) = delete;
  SessionUnwinder& operator=(const SessionUnwinder&) = delete;

  // The maps, by the names BPF objects declare them under, for a plugin's setup (abi/host.h
  // unwinder_maps): created on the first call, which hands them to the tables and the
  // runtimes; an error (said once in the log) when the kernel refused one. A session whose
  // plugins take no user stacks never creates them. The session's thread.
  Result<const std::vector<loupe_map_ref>*> maps();
  bool created() const { return !refs_.empty(); }

  // Which runtimes' entries pid has (LOUPE_UNWIND_PROC_RUNTIME bits), each runtime asked
  // and its entry written. The tables' thread, when pid's mappings changed.
  std::uint32_t update(std::uint32_t pid, const std::vector<MapsEntry>& maps);
  void forget(std::uint32_t pid);
  // The first sightings the walks told since the last call, to their runtimes; and the
  // processes a runtime was not ready for asked again, their entry's bits rewritten
  // through `rewrite(pid, bits)` when that changed them.
  void poll(const std::function<void(std::uint32_t, std::uint32_t)>& rewrite);
  // A runtime frame's functions (Symbolizer::RuntimeNamer). Any thread.
  std::uint32_t name(std::uint32_t pid, std::uint64_t frame, Symbolizer::RuntimeName* out,
                     std::uint32_t max);
  void report_health(HealthReport& health) const;
  // Runtime::tick and before_final_report, to every runtime. The session's thread.
  void tick(const std::vector<pid_t>& processes);
  void before_final_report(const std::vector<pid_t>& processes);

 private:
  Status create();
  static int on_record(void* self, void* data, std::size_t size);
  Status make_map(const RuntimeMapSpec& spec, const char* kernel_name);

  ProcessTables& tables_;
  ProcessWatch& watch_;
  std::uint32_t rows_;
  std::string create_error_;  // why the maps could not be made: the first call's
  std::vector<std::unique_ptr<Runtime>> runtimes_;
  std::vector<UniqueFd> fds_;
  std::vector<std::string> names_;  // owned: refs_ points into them
  std::vector<loupe_map_ref> refs_;
  std::map<std::string, int> by_name_;
  ring_buffer* ring_ = nullptr;
  // Reads the ring as soon as a walk tells a sighting (the ring wakes it), so a runtime
  // reads what a frame refers to while its process lives: a script's last sightings came
  // within its last milliseconds, and the session's tick came after it had exited.
  std::thread reader_;
  std::atomic<bool> stop_{false};
  UniqueFd wake_;  // an eventfd the destructor writes so the reader sees stop_ at once
  void read_loop();
  // Processes a runtime said to ask again (kLater), and when they were last asked.
  std::mutex later_mu_;
  std::map<std::uint32_t, std::uint64_t> later_;
  std::mutex ring_mu_;  // libbpf: one reader of a ring at a time
  std::uint64_t unknown_runtime_ = 0;
};

}  // namespace loupe

#endif  // LOUPE_UNWIND_SESSION_UNWINDER_HPP
