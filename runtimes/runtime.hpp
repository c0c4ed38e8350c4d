// SPDX-License-Identifier: Apache-2.0
//
// A language runtime whose frames the in-kernel unwinder walks (CPython, HotSpot): the
// contract between the session's unwinder (unwind/session_unwinder.hpp) and one runtime's
// folder under runtimes/. The walk holds them as this interface, from the table
// runtimes/registry.cpp makes, as the kernel features are one table; the engine never
// names one.
//
// A runtime brings
//   - its frame tag (LOUPE_RUNTIME_*, loupe/unwind.h) and its BPF step, a header the walk
//     includes (bpf/include/loupe/unwind_<runtime>.bpf.h);
//   - the BPF maps that step reads (its per-process entries), which the session creates
//     once and every plugin's walk shares;
//   - update(pid): whether a process runs it (from its mappings, the session's one read),
//     writing the entry the walk reads. Called on the session's thread, at the tables'
//     refresh, so that the entry is written before the process's next sample: a runtime
//     keeps it cheap (a few reads of the process's memory; a JVM's layout once per libjvm);

//   - seen(): the first sighting of something its frames refer to (a code object, a
//     method), told by the walk through the session's ring, to be read while the process
//     lives (a script that exits right after its last sample keeps its names);
//   - name(): the functions a tagged frame stands for, innermost first (a compiled Java
//     frame names the methods inlined at its pc too), also after the process is gone;
//   - its own health rows: what it could not read, counted.
#ifndef LOUPE_RUNTIMES_RUNTIME_HPP
#define LOUPE_RUNTIMES_RUNTIME_HPP

#include <linux/bpf.h>
#include <sys/types.h>

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "loupe/abi/plugin.h"
#include "loupe/symbolizer.hpp"
#include "loupe/unwind.h"
#include "plugins/config_tree.hpp"
#include "symbols/process_maps.hpp"
#include "util/result.hpp"

namespace loupe {

class HealthReport;

// A BPF map a runtime's walk step reads: `name` as its BPF header declares it, so every
// plugin object's map of that name becomes the session's.
struct RuntimeMapSpec {
  std::string name;
  bpf_map_type type;
  std::uint32_t key_size, value_size, max_entries, flags;
};

class Runtime {
 public:
  virtual ~Runtime() = default;
  // Health rows' component ("python_frames") and logs.
  virtual const char* name() const = 0;
  virtual std::uint32_t id() const = 0;             // LOUPE_RUNTIME_*
  virtual loupe_frame_kind frame_kind() const = 0;  // its frames' kind in records
  virtual std::vector<RuntimeMapSpec> maps() const = 0;
  // The session made the maps: fds by RuntimeMapSpec::name. Before any update().
  virtual Status attach(const std::map<std::string, int>& fds) = 0;
  // pid (new, or its code mappings changed), with its mappings as the session read them
  // (the one read): kYes when they make it this runtime's and its entry is written; kLater
  // when they do but it is not ready to be read (a JVM whose CodeCache is not made yet:
  // asked again soon). Any one thread at a time.
  enum class Update { kNo, kYes, kLater };
  virtual Update update(std::uint32_t pid, const std::vector<MapsEntry>& maps) = 0;
  virtual void forget(std::uint32_t pid) = 0;
  // A first sighting the walk told (key.runtime == id()). The ring's reader's thread.
  virtual void seen(const loupe_runtime_seen_key& key) = 0;
  // The functions `frame` (LOUPE_RUNTIME_ID(frame) == id()) of `pid` stands for, up to
  // `max` into `out`, innermost first; 0 when unknown (the session's unwinder then names one
  // frame of this runtime's kind, unresolved). Any thread.
  virtual std::uint32_t name(std::uint32_t pid, std::uint64_t frame, Symbolizer::RuntimeName* out,
                             std::uint32_t max) = 0;
  virtual void report_health(HealthReport& health) const = 0;
  // The target's live processes, once per session tick (a runtime that asks its processes
  // for something, as the JVM's perf map fallback does); and once more just before the
  // final report. Nothing by default.
  virtual void tick(const std::vector<pid_t>& processes) { (void)processes; }
  virtual void before_final_report(const std::vector<pid_t>& processes) { (void)processes; }
};

// What a runtime is made with: where processes are read, and its own profile table,
// [runtimes.<key>], validated against its keys (plugins/runtime_keys.hpp; defaults filled
// when the profile has no such table), as a plugin's table is against its schema.
struct RuntimeConfig {
  std::string proc_root = "/proc";
  const loupe_config* values = nullptr;
};

// One row of the table of runtimes (runtimes/registry.cpp).
struct RuntimeRow {
  const char* key;  // its profile table: [runtimes.<key>]
  std::unique_ptr<Runtime> (*make)(const RuntimeConfig&);
};

// The table of runtimes: one row each, in LOUPE_RUNTIME_* order.
const std::vector<RuntimeRow>& runtime_table();

// One of each runtime of the table, each with its [runtimes.<key>] values (`values` by key,
// as the profile parsed them).
std::vector<std::unique_ptr<Runtime>> make_runtimes(
    const std::string& proc_root,
    const std::map<std::string, std::shared_ptr<const loupe_config>>& values);

}  // namespace loupe

#endif  // LOUPE_RUNTIMES_RUNTIME_HPP
