// SPDX-License-Identifier: Apache-2.0
//
// Turns the kernel's per-program run counts into records (`loupe run --stats`): per BPF
// program, with the probes that share it, the cumulative runs and run time, and over the
// report's window the average ns per run, runs per second and the share of all online
// CPUs spent in it; plus design check 6: a probe that never ran is reported, not hidden.
//
// And loupe's whole cost over each report's window (`cost_cpu_percent`): its programs' run
// time plus its own threads' CPU time, as a share of all online CPUs' time, per plugin
// instance, checked against `[session] max_cpu_percent` when one is declared.
#ifndef LOUPE_SESSION_PROBE_STATS_REPORTER_HPP
#define LOUPE_SESSION_PROBE_STATS_REPORTER_HPP

#include <loupe/abi/records.h>

#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "loupe/program_stats.hpp"
#include "session/cost_meter.hpp"

namespace loupe {

class ProbeStatsReporter {
 public:
  using Publish = std::function<void(const loupe_record&)>;
  ProbeStatsReporter(Publish publish, unsigned online_cpus);

  // The probes are attached and counting from `mono_ns` on; the session began at `wall_ns`
  // (CLOCK_REALTIME), where the cumulative counters' window starts.
  // `self_cpu_ns`: loupe's threads' CPU time then (CLOCK_PROCESS_CPUTIME_ID).
  void start(std::uint64_t mono_ns, std::uint64_t wall_ns, std::uint64_t self_cpu_ns) {
    meter_.start(mono_ns, self_cpu_ns);
    session_start_wall_ = wall_ns;
  }
  // `[session] max_cpu_percent` (0: none): reports over it are counted and said, with what
  // `thinned()` says the budget controller thinned to stay within it (empty: nothing).
  void set_budget(double percent, std::function<std::string()> thinned) {
    budget_percent_ = percent;
    thinned_ = std::move(thinned);
  }
  std::uint64_t start_ns() const { return meter_.start_ns(); }
  // Interval reports cover the window since the previous report; the final one the session.
  void report(const std::vector<ProgramStats>& now, std::uint64_t mono_ns,
              std::uint64_t self_cpu_ns, bool is_final);
  // Without --stats: only the events the kernel skipped because the program was already
  // running on that CPU (its recursion-miss count needs no statistics switched on), so a
  // session never loses events to that silently.
  void report_misses(const std::vector<ProgramStats>& now, bool is_final);

 private:
  void metric(const char* name, std::uint32_t type, const char* unit, double v,
              const loupe_label* labels, std::uint32_t n, bool is_final);
  void health(const char* name, const std::string& component, std::uint64_t v, std::uint32_t sev,
              const std::string& msg, bool is_final);
  void misses(const ProgramStats& s, const std::string& probes, bool is_final);
  void cost(const CostWindow& w, bool is_final);

  Publish publish_;
  unsigned cpus_;
  CostMeter meter_;  // report to report; the final one from the start
  std::uint64_t session_start_wall_ = 0;
  double budget_percent_ = 0;
  std::function<std::string()> thinned_;
  std::uint64_t reports_ = 0, reports_over_ = 0;
  double worst_percent_ = 0;
  std::string worst_;  // the costliest report over the budget, said
};

}  // namespace loupe

#endif  // LOUPE_SESSION_PROBE_STATS_REPORTER_HPP
