// SPDX-License-Identifier: Apache-2.0
//
// loupe's own cost over a window: its BPF programs' run time (the kernel's cumulative
// statistics, one set of counts per program however many probes attach it) and its
// threads' CPU time, against what the machine's online CPUs had. One meter for the
// reports' cost rows (probe_stats_reporter.hpp) and the budget's ticks
// (budget_controller.hpp), so the two never disagree on what loupe cost.
#ifndef LOUPE_SESSION_COST_METER_HPP
#define LOUPE_SESSION_COST_METER_HPP

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "loupe/program_stats.hpp"

namespace loupe {

struct ProgramCost {
  std::uint64_t runs = 0, ns = 0;
};

// What one window cost.
struct CostWindow {
  double seconds = 0;
  unsigned cpus = 1;
  std::map<std::uint32_t, ProgramCost> by_program;  // by program id
  std::map<std::string, ProgramCost> by_instance;   // the plugin instance's programs
  double self_ns = 0;                               // loupe's threads

  double capacity_ns() const { return seconds * 1e9 * cpus; }
  // `ns` as a percent of what every online CPU had over the window (0 for an empty one).
  double percent(double ns) const { return capacity_ns() > 0 ? 100 * ns / capacity_ns() : 0; }
  double bpf_ns() const {
    double sum = 0;
    for (const auto& [instance, c] : by_instance) sum += static_cast<double>(c.ns);
    return sum;
  }
  double total_percent() const { return percent(bpf_ns() + self_ns); }
  double instance_ns(const std::string& instance) const {
    auto it = by_instance.find(instance);
    return it == by_instance.end() ? 0 : static_cast<double>(it->second.ns);
  }
  double instance_runs(const std::string& instance) const {
    auto it = by_instance.find(instance);
    return it == by_instance.end() ? 0 : static_cast<double>(it->second.runs);
  }
  // An instance's programs' cost per event over the window (0 without events).
  double ns_per_event(const std::string& instance) const {
    const double n = instance_runs(instance);
    return n > 0 ? instance_ns(instance) / n : 0;
  }
};

class CostMeter {
 public:
  explicit CostMeter(unsigned online_cpus) : cpus_(online_cpus ? online_cpus : 1) {}

  // The baseline: monotonic time, loupe's CPU time and the programs' counts then (none: the
  // programs count from zero, their load).
  void start(std::uint64_t mono_ns, std::uint64_t self_cpu_ns,
             const std::vector<ProgramStats>& programs = {});
  bool started() const { return started_; }
  std::uint64_t start_ns() const { return start_.mono; }
  // The window since the last measure() (or start()), or since start() when `whole`; the
  // next window begins now either way.
  CostWindow measure(const std::vector<ProgramStats>& now, std::uint64_t mono_ns,
                     std::uint64_t self_cpu_ns, bool whole = false);

 private:
  struct Mark {
    std::uint64_t mono = 0, self = 0;
    std::map<std::uint32_t, ProgramCost> programs;
  };
  static std::map<std::uint32_t, ProgramCost> totals(const std::vector<ProgramStats>& programs);

  unsigned cpus_;
  bool started_ = false;
  Mark start_, last_;
};

}  // namespace loupe

#endif  // LOUPE_SESSION_COST_METER_HPP
