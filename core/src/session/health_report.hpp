// SPDX-License-Identifier: Apache-2.0
//
// The core's own account of what it lost and why, as records every sink receives next to
// the plugins' data: per ring (received, lost in the kernel, dropped, merged, malformed),
// per plugin, per probe that failed to attach, per sink that dropped, plus the dispatch
// changes made under pressure. The session gathers the facts; this turns them into
// records, so neither Session nor a sink has to know the other's bookkeeping.
#ifndef LOUPE_SESSION_HEALTH_REPORT_HPP
#define LOUPE_SESSION_HEALTH_REPORT_HPP

#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "dispatch/ring_dispatcher.hpp"
#include "dispatch/sink_runner.hpp"
#include "kernel/bpf_lifecycle.hpp"
#include "kernel/process_tree.hpp"
#include "loupe/abi/records.h"
#include "loupe/symbolizer.hpp"
#include "session/window_store.hpp"
#include "symbols/process_watch.hpp"

namespace loupe {

// What the session knows about one instance at the end of a run.
struct ProfilerHealth {
  std::string instance;
  std::uint64_t collect_errors = 0;
  bool disabled = false;
  std::uint64_t rejected_records = 0;
};
struct SinkHealth {
  std::string instance;
  SinkStats stats;
};

// What a health value is a part of and what it did to the data (loupe_health.whole,
// effect); whole 0: no share to give.
struct HealthShare {
  std::uint64_t whole = 0;
  const char* unit = nullptr;
  loupe_health_effect effect = LOUPE_HEALTH_EFFECT_UNSAID;
};

// Session-thread only, except dispatch_event(), which the ring reader calls; both reach
// `publish`, which must be safe from either thread (the record bus is).
class HealthReport {
 public:
  using Publish = std::function<void(const loupe_record&)>;
  HealthReport(Publish publish, bool replay) : publish_(std::move(publish)), replay_(replay) {}

  // CLOCK_REALTIME at the session's start: the window of the cumulative counters.
  void session_started(std::uint64_t wall_ns) { session_start_wall_ = wall_ns; }

  // Every interval and at the end: the rings' counters and the coalesced keys so far.
  void rings(const std::vector<RingStats>& stats, std::vector<CoalescedCount> coalesced,
             bool is_final);
  // At the end only: what failed outside the rings.
  void final_failures(const std::vector<ProbeResult>& probes,
                      const std::vector<ProfilerHealth>& profilers,
                      const std::vector<SinkHealth>& sinks, const std::string& stats_error);
  // At the end: the process tree the session followed (`tree`), or why it followed none
  // although asked to (`unavailable`).
  void process_tree(const ProcessTree::Counters* tree, const std::string& unavailable);
  // Exited processes the full symbol cache dropped (WARN when any: stacks left unnamed).
  void symbol_cache(const SymbolizerStats& stats);
  // At the end: how the symbolizer followed the target's mappings through the kernel's
  // records (`stats`), or why it could not (`unavailable`).
  void mapping_records(const SymbolizerStats* stats, const std::string& unavailable);
  // At the end, when a plugin uses the in-kernel unwinder: the tables kept for it, and the
  // files left without rows (the rows map was full, or still being built at the end: their
  // frames unwind by frame pointers).
  void unwind_tables(std::uint64_t processes, std::uint64_t files, std::uint64_t rows,
                     std::uint64_t row_bytes, std::uint64_t rows_full, std::uint64_t write_errors,
                     std::uint64_t build_ns, std::uint64_t pending);
  // At the end, when a process's maps were asked for: how often /proc was read and how
  // often one read served several parts; system-wide, what the kernel's records of every
  // process said (or why there were none).
  // `ended_unread`: processes that ended before anything needed their maps (counted, not
  // resolved: the files they ran came from their records).
  void process_watch(const ProcessWatch::Counters& c, const std::string& unavailable,
                     std::uint64_t ended_unread);
  // At the end, when debuginfod was asked: what it delivered and what it could not.
  void debuginfod(const SymbolizerStats& stats);
  // Every report of a rotating session: the windows written, kept and pruned (OK), and
  // those published without a sink's files or not at all (WARN).
  void windows(const WindowStore::Counters& c, const std::string& root, bool is_final);
  // A change the ring reader made on its own (sampling divisor, count-only mode).
  void dispatch_event(const DispatchEvent& ev, std::uint64_t wall_ns);

  // One row of a part's own (a runtime's): `name` under `component`, final.
  using Share = HealthShare;
  void health(const std::string& name, const std::string& component, std::uint64_t value,
              std::uint32_t severity, const std::string& message, bool is_final,
              const Share& share = {});

 private:
  Publish publish_;
  bool replay_;
  std::uint64_t session_start_wall_ = 0;
  std::map<std::pair<std::string, std::uint64_t>, std::uint64_t>
      coalesced_totals_;  // (ring, key), cumulative
};

}  // namespace loupe

#endif  // LOUPE_SESSION_HEALTH_REPORT_HPP
