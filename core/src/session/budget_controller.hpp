// SPDX-License-Identifier: Apache-2.0
//
// `[session] max_cpu_percent` kept, not only measured. Every tick (a second, from the
// session loop) loupe's cost over the tick is measured as the report measures it (its BPF
// programs' run time from the kernel's statistics plus its own threads' CPU time, over all
// online CPUs' time) and compared with the budget:
//
//   over it   the costliest profiler that can be thinned (plugin ABI 1.9 set_rate) keeps
//             fewer events: its divisor jumps in one step to where its programs' cost
//             would bring loupe's within the budget (rounded up to a power of two;
//             its cost per event modelled from its last raise), so a session reaches its divisor in
//             a step or two, not a doubling every few seconds; each kept event then weighs the
//             divisor, so its counts stay estimates of the whole;
//   under half of it for kCalmTicks ticks in a row, the most thinned profiler gets twice
//             as many events back.
//
// After a change the next kSettleTicks ticks only measure (they still hold time at the old
// rate). A profiler whose own programs are a small part of the excess is not thinned: when
// loupe's threads are the cost, thinning would lose precision and save nothing; nor is one
// whose programs take under a tenth of the budget (a 19 Hz sampler). Nor is one
// thinned further once the next raise would take less than a tenth off its programs' cost
// per event: an event costs e + f / N (e the early exit every event still runs, f the part
// thinning removes), e and f come from the cost before and after its last raise, and what
// is left is e, which no divisor lowers.
//
// Every change is an event record (`budget_thinning`); every report has the divisors in
// force (`thinning_divisor` gauges), and summary() says what was thinned for the `budget`
// health row. Session thread; not thread-safe.
#ifndef LOUPE_SESSION_BUDGET_CONTROLLER_HPP
#define LOUPE_SESSION_BUDGET_CONTROLLER_HPP

#include <loupe/abi/records.h>

#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "loupe/program_stats.hpp"
#include "session/cost_meter.hpp"

namespace loupe {

class BudgetController {
 public:
  using Publish = std::function<void(const loupe_record&)>;
  // What the controller may turn: the profilers that can be thinned now, and the call that
  // thins one (false, with the plugin's reason, when it refused: it is not asked again).
  struct Knobs {
    std::function<std::vector<std::string>()> thinnable;
    std::function<bool(const std::string& instance, std::uint32_t divisor, std::string* why)>
        set_rate;
  };
  static constexpr std::uint32_t kMaxDivisor = 1024;
  static constexpr std::uint32_t kMaxStep = 8;
  static constexpr int kSettleTicks = 2;
  static constexpr int kCalmTicks = 5;

  BudgetController(double budget_percent, unsigned online_cpus, Publish publish, Knobs knobs);

  // One measurement: the programs' cumulative counts, loupe's CPU time (both cumulative),
  // monotonic and wall time now. The first call only sets the baseline.
  void tick(const std::vector<ProgramStats>& now, std::uint64_t mono_ns, std::uint64_t self_cpu_ns,
            std::uint64_t wall_ns);
  // At every report: a `thinning_divisor` gauge per profiler that can be thinned.
  void report(bool is_final);
  // What was thinned, for the budget health row; empty when nothing ever was.
  std::string summary() const;
  std::uint32_t divisor(const std::string& instance) const;

 private:
  struct Thinned {
    std::uint32_t divisor = 1, highest = 1;
    std::uint64_t raised = 0, lowered = 0;
    double ns_per_event_before = 0;    // its programs' cost per event before the last raise
    std::uint32_t divisor_before = 1;  // ... and the divisor then
    double floor_ns = 0;               // > 0: thinning further saves little; the cost then
  };
  static bool saturated(const Thinned& t, double ns_per_event, std::uint32_t step);
  std::uint32_t next_divisor(const std::string& instance, double pick_ns, double allowed_ns,
                             double events) const;
  void change(const std::string& instance, std::uint32_t to, double cost_percent,
              double instance_percent, double ns_per_event, std::uint64_t wall_ns);

  double budget_;
  unsigned cpus_;
  Publish publish_;
  Knobs knobs_;
  CostMeter meter_;                             // tick to tick
  std::uint64_t first_mono_ = 0;                // the first tick's, for "n s into the session"
  std::map<std::string, Thinned> thinned_;      // by instance
  std::map<std::string, std::string> refused_;  // instance -> why
  int settle_ = 0, calm_ = 0;
  bool said_cannot_ = false;
};

}  // namespace loupe

#endif  // LOUPE_SESSION_BUDGET_CONTROLLER_HPP
