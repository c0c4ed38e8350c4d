// SPDX-License-Identifier: Apache-2.0
#include "session/budget_controller.hpp"

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <utility>

#include "loupe/sdk/records.hpp"

namespace loupe {

BudgetController::BudgetController(double budget_percent, unsigned online_cpus, Publish publish,
                                   Knobs knobs)
    : budget_(budget_percent),
      cpus_(online_cpus ? online_cpus : 1),
      meter_(cpus_),
      publish_(std::move(publish)),
      knobs_(std::move(knobs)) {}

void BudgetController::tick(const std::vector<ProgramStats>& now, std::uint64_t mono_ns,
                            std::uint64_t self_cpu_ns, std::uint64_t wall_ns) {
  if (!meter_.started()) {
    // The first tick sets the baseline.
    meter_.start(mono_ns, self_cpu_ns, now);
    first_mono_ = mono_ns;
    return;
  }
  const CostWindow w = meter_.measure(now, mono_ns, self_cpu_ns);
  if (w.seconds <= 0) return;
  const double capacity = w.capacity_ns();
  const double cost = w.total_percent();
  if (settle_ > 0) {
    --settle_;
    return;
  }
  const std::vector<std::string> knobs = knobs_.thinnable();
  if (cost > budget_) {
    calm_ = 0;
    // The costliest profiler that can still be thinned, if its programs are a fair part of
    // what is over: thinning it then lowers both its programs' time and what loupe's
    // threads do with its events.
    const double excess_ns = (cost - budget_) / 100 * capacity;
    const double budget_ns = budget_ / 100 * capacity;
    std::string pick;
    double pick_ns = 0;
    for (const auto& instance : knobs) {
      const double ns = w.instance_ns(instance);
      // One whose programs take under a tenth of the budget is not worth its precision.
      if (divisor(instance) >= kMaxDivisor || ns <= pick_ns || ns < budget_ns / 10) continue;
      auto t = thinned_.find(instance);
      if (t != thinned_.end() && t->second.floor_ns > 0) continue;
      if (t != thinned_.end() && saturated(t->second, w.ns_per_event(instance), 2)) {
        t->second.floor_ns = w.ns_per_event(instance);
        spdlog::warn(
            "{}: at 1 in {} its programs cost {:.0f} ns an event (1 in {}: {:.0f}); thinning "
            "it further would take less than a tenth off",
            instance, t->second.divisor, w.ns_per_event(instance), t->second.divisor_before,
            t->second.ns_per_event_before);
        continue;
      }
      pick = instance;
      pick_ns = ns;
    }
    if (pick.empty() || pick_ns < excess_ns / 4) {
      // Said once, with when: in a session's first seconds the cost is mostly tables
      // being built, which passes; the budget row at the end says how every report fared.
      if (!said_cannot_)
        spdlog::warn(
            "loupe used {:.2f}% of {} CPUs in the second ending {:.0f} s into the session, over "
            "max_cpu_percent = {}, and {}",
            cost, cpus_, static_cast<double>(mono_ns - first_mono_) / 1e9, budget_,
            pick.empty() ? "no profiler can be thinned further"
                         : "its own threads, not a profiler's programs, are most of it");
      said_cannot_ = true;
      return;
    }
    // Rounded up to a power of two, the divisor leaves room below the budget for noise.
    const double allowed_ns = pick_ns - excess_ns;
    const double events = w.instance_runs(pick);
    change(pick, next_divisor(pick, pick_ns, allowed_ns, events), cost, 100 * pick_ns / capacity,
           w.ns_per_event(pick), wall_ns);
    return;
  }
  if (cost >= budget_ / 2) {
    calm_ = 0;
    return;
  }
  if (++calm_ < kCalmTicks) return;
  // Well within the budget for a while: the most thinned profiler gets events back.
  std::string pick;
  for (const auto& instance : knobs)
    if (divisor(instance) > 1 && (pick.empty() || divisor(instance) > divisor(pick)))
      pick = instance;
  if (pick.empty()) return;
  calm_ = 0;
  const double ns = w.instance_ns(pick);
  change(pick, divisor(pick) / 2, cost, 100 * ns / capacity, w.ns_per_event(pick), wall_ns);
}

void BudgetController::change(const std::string& instance, std::uint32_t to, double cost_percent,
                              double instance_percent, double ns_per_event, std::uint64_t wall_ns) {
  Thinned& t = thinned_[instance];
  const std::uint32_t from = t.divisor;
  std::string why;
  if (!knobs_.set_rate(instance, to, &why)) {
    refused_[instance] = why;
    spdlog::warn("{} cannot be thinned: {}", instance, why);
    return;
  }
  t.divisor = to;
  t.highest = std::max(t.highest, to);
  // Judged at the next raise; a lowering starts the judgement afresh.
  t.ns_per_event_before = to > from ? ns_per_event : 0;
  t.divisor_before = from;
  if (to < from) t.floor_ns = 0;
  (to > from ? t.raised : t.lowered) += 1;
  settle_ = kSettleTicks;
  spdlog::info("max_cpu_percent = {}: loupe used {:.2f}%; {} now keeps 1 in {} events (was {})",
               budget_, cost_percent, instance, to, from);
  sdk::RecordBuilder b(LOUPE_RECORD_EVENT, "budget_thinning");
  b.event_time(wall_ns)
      .field("instance", instance)
      .field("change", std::string(to > from ? "raised" : "lowered"))
      .field_u("old_divisor", from)
      .field_u("new_divisor", to)
      .field("cost_cpu_percent", cost_percent)
      .field("instance_bpf_cpu_percent", instance_percent)
      .field("max_cpu_percent", budget_);
  publish_(b.build());
}

// The divisor at which `instance`'s programs, at pick_ns over the tick, would take allowed_ns:
// with c = e + f / N per event, e and f known from the last raise (else e taken as 0, all
// of it thinnable), the N where c = allowed_ns / events; where even e alone is over that, the
// N past which a doubling takes less than a tenth off (f / 2N < (e + f / N) / 10, N > 4f / e).
// A power of two, from twice the divisor now to kMaxStep times it (a model from one tick
// is not trusted further), at most kMaxDivisor.
std::uint32_t BudgetController::next_divisor(const std::string& instance, double pick_ns,
                                             double allowed_ns, double events) const {
  const std::uint32_t now = divisor(instance);
  double want = 2.0 * now;
  if (events > 0) {
    const double c = pick_ns / events, target = std::max(allowed_ns, 0.0) / events;
    double e = 0, f = c * now;
    auto t = thinned_.find(instance);
    if (t != thinned_.end() && t->second.ns_per_event_before > 0 &&
        t->second.divisor > t->second.divisor_before) {
      const double d1 = t->second.divisor_before, d2 = t->second.divisor;
      f = std::max(0.0, (t->second.ns_per_event_before - c) / (1 / d1 - 1 / d2));
      e = std::max(0.0, c - f / d2);
    }
    if (target > e && f > 0)
      want = f / (target - e);
    else if (e > 0)
      want = 4 * f / e;
  } else if (allowed_ns > 0) {
    want = now * pick_ns / allowed_ns;
  } else {
    want = kMaxDivisor;
  }
  std::uint32_t to = 2 * now;
  while (to < want && to < now * kMaxStep && to < kMaxDivisor) to *= 2;
  return std::min(to, kMaxDivisor);
}

// With c = e + f / N per event at the divisors before and after the last raise, what the
// next raise (to N * step) would take off is f * (1/N - 1/(N * step)).
bool BudgetController::saturated(const Thinned& t, double ns_per_event, std::uint32_t step) {
  if (t.ns_per_event_before <= 0 || ns_per_event <= 0 || t.divisor <= t.divisor_before)
    return false;
  const double d1 = t.divisor_before, d2 = t.divisor;
  const double f = (t.ns_per_event_before - ns_per_event) / (1 / d1 - 1 / d2);
  const double gain = f * (1 / d2 - 1 / (d2 * step));
  return gain < 0.1 * ns_per_event;
}

std::uint32_t BudgetController::divisor(const std::string& instance) const {
  auto it = thinned_.find(instance);
  return it == thinned_.end() ? 1 : it->second.divisor;
}

void BudgetController::report(bool is_final) {
  std::vector<std::string> instances = knobs_.thinnable();
  for (const auto& [instance, t] : thinned_)
    if (std::find(instances.begin(), instances.end(), instance) == instances.end())
      instances.push_back(instance);
  for (const auto& instance : instances) {
    sdk::RecordBuilder b(LOUPE_RECORD_METRIC, "thinning_divisor");
    b.final(is_final).label("instance", instance);
    b.metric(LOUPE_METRIC_GAUGE, "divisor", static_cast<double>(divisor(instance)));
    publish_(b.build());
  }
}

std::string BudgetController::summary() const {
  std::string out;
  for (const auto& [instance, t] : thinned_) {
    if (t.highest <= 1) continue;
    out +=
        fmt::format("{}{} kept 1 in {} events at most ({} now; raised {}, lowered {} times)",
                    out.empty() ? "" : "; ", instance, t.highest, t.divisor, t.raised, t.lowered);
    if (t.floor_ns > 0)
      out += fmt::format(
          ", not thinned further: its programs still cost {:.0f} ns an event, the hooks' "
          "bare entry that every event runs",
          t.floor_ns);
  }
  for (const auto& [instance, why] : refused_)
    out += fmt::format("{}{} refused to be thinned ({})", out.empty() ? "" : "; ", instance, why);
  return out;
}

}  // namespace loupe
