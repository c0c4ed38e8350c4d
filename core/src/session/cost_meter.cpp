// SPDX-License-Identifier: Apache-2.0
#include "session/cost_meter.hpp"

#include <algorithm>

namespace loupe {

// A program attached by several probes has one set of counts: taken once.
std::map<std::uint32_t, ProgramCost> CostMeter::totals(const std::vector<ProgramStats>& programs) {
  std::map<std::uint32_t, ProgramCost> out;
  for (const auto& s : programs) out.emplace(s.prog_id, ProgramCost{s.run_cnt, s.run_time_ns});
  return out;
}

void CostMeter::start(std::uint64_t mono_ns, std::uint64_t self_cpu_ns,
                      const std::vector<ProgramStats>& programs) {
  start_ = {mono_ns, self_cpu_ns, totals(programs)};
  last_ = start_;
  started_ = true;
}

CostWindow CostMeter::measure(const std::vector<ProgramStats>& now, std::uint64_t mono_ns,
                              std::uint64_t self_cpu_ns, bool whole) {
  const Mark& base = whole ? start_ : last_;
  CostWindow w;
  w.cpus = cpus_;
  w.seconds = mono_ns > base.mono ? static_cast<double>(mono_ns - base.mono) / 1e9 : 0;
  w.self_ns = static_cast<double>(self_cpu_ns - std::min(base.self, self_cpu_ns));
  Mark next{mono_ns, self_cpu_ns, {}};
  for (const auto& s : now) {
    if (!next.programs.emplace(s.prog_id, ProgramCost{s.run_cnt, s.run_time_ns}).second) continue;
    // A program the baseline has not seen counts from its load.
    auto b = base.programs.find(s.prog_id);
    const ProgramCost from = b == base.programs.end() ? ProgramCost{} : b->second;
    const ProgramCost d{s.run_cnt - std::min(from.runs, s.run_cnt),
                        s.run_time_ns - std::min(from.ns, s.run_time_ns)};
    w.by_program[s.prog_id] = d;
    ProgramCost& inst = w.by_instance[s.instance];
    inst.runs += d.runs;
    inst.ns += d.ns;
  }
  last_ = std::move(next);
  return w;
}

}  // namespace loupe
