// SPDX-License-Identifier: Apache-2.0
//
// What the kernel counts of the session's own BPF programs: with --stats (or `[session]
// stats`) every program's runs and run time, reported each window; always, at the end, the
// events each program missed because it was already running on that CPU (recursion misses
// need no statistics switched on), so no event is lost to that silently.
#ifndef LOUPE_SESSION_PROBE_ACCOUNTING_HPP
#define LOUPE_SESSION_PROBE_ACCOUNTING_HPP

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "kernel/bpf_lifecycle.hpp"
#include "kernel/probe_stats.hpp"
#include "session/probe_stats_reporter.hpp"

namespace loupe {

class ProbeAccounting {
 public:
  explicit ProbeAccounting(ProbeStatsReporter::Publish publish) : publish_(std::move(publish)) {}

  // Before any program loads, so the counts cover every run; the kernel's (small) cost
  // ends with the session. A kernel that refuses leaves the session without statistics,
  // warned and said in the final health.
  void enable();
  // `[session] max_cpu_percent`: loupe's cost is checked against it at every report (the
  // statistics must be enabled).
  void set_budget(double percent, std::function<std::string()> thinned) {
    if (reporter_) reporter_->set_budget(percent, std::move(thinned));
  }
  // loupe's threads' CPU time so far, the ones gone included (CLOCK_PROCESS_CPUTIME_ID).
  static std::uint64_t self_cpu_ns();
  // Every probe is attached: windows count from here.
  void start(std::uint64_t mono_ns, std::uint64_t wall_ns);
  // Just before the detach closes the programs: their last counts, for the final report.
  void snapshot(const LinkSet& links);
  // With statistics: the last counts and how long the probes were attached (seconds).
  bool counting() const { return reporter_ != nullptr; }
  const std::vector<ProgramStats>& final_stats() const { return final_; }
  double attached_s() const;
  void report(const LinkSet& links, bool is_final);
  const std::string& error() const { return error_; }

 private:
  ProbeStatsReporter::Publish publish_;
  ProbeStats stats_;  // the kernel counts while this fd is open
  std::unique_ptr<ProbeStatsReporter> reporter_;
  std::vector<ProgramStats> final_;
  std::uint64_t final_ns_ = 0;
  std::uint64_t final_self_ns_ = 0;  // loupe's threads' CPU time at the snapshot
  std::string error_;                // why --stats could not be honoured
};

}  // namespace loupe

#endif  // LOUPE_SESSION_PROBE_ACCOUNTING_HPP
