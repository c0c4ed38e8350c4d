// SPDX-License-Identifier: Apache-2.0
#include "session/probe_stats_reporter.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <utility>
#include <vector>

namespace loupe {
namespace {

struct Program {
  const ProgramStats* stats = nullptr;  // the counts are the program's, whichever probe read them
  std::vector<std::string> probes;
  std::vector<std::string> targets;
};

std::string join(const std::vector<std::string>& v) {
  std::string out;
  for (const auto& s : v) out += (out.empty() ? "" : ",") + s;
  return out;
}

// One program attached by several probes (a cookie per target) has one set of counts:
// report it once, naming every probe, rather than N copies that would sum to N times it.
std::map<std::uint32_t, Program> by_program(const std::vector<ProgramStats>& now) {
  std::map<std::uint32_t, Program> programs;
  for (const auto& s : now) {
    auto& p = programs[s.prog_id];
    if (!p.stats) p.stats = &s;
    p.probes.push_back(s.probe);
    if (!s.target.empty() &&
        std::find(p.targets.begin(), p.targets.end(), s.target) == p.targets.end())
      p.targets.push_back(s.target);
  }
  return programs;
}

}  // namespace

ProbeStatsReporter::ProbeStatsReporter(Publish publish, unsigned online_cpus)
    : publish_(std::move(publish)), cpus_(online_cpus ? online_cpus : 1), meter_(cpus_) {}

void ProbeStatsReporter::metric(const char* name, std::uint32_t type, const char* unit, double v,
                                const loupe_label* labels, std::uint32_t n, bool is_final) {
  loupe_metric m{sizeof(m), type, unit, v};
  loupe_record r{};
  r.size = sizeof(r);
  r.kind = LOUPE_RECORD_METRIC;
  r.name = name;
  r.labels = labels;
  r.n_labels = n;
  r.is_final = is_final ? 1 : 0;
  // Counters count since the session began; gauges are the report's window (0: the host's).
  if (type == LOUPE_METRIC_COUNTER) r.window_start_ns = session_start_wall_;
  r.metric = &m;
  publish_(r);
}

void ProbeStatsReporter::health(const char* name, const std::string& component, std::uint64_t v,
                                std::uint32_t sev, const std::string& msg, bool is_final) {
  loupe_health h{sizeof(h), sev, component.c_str(), v, msg.empty() ? nullptr : msg.c_str()};
  loupe_record r{};
  r.size = sizeof(r);
  r.kind = LOUPE_RECORD_HEALTH;
  r.name = name;
  r.is_final = is_final ? 1 : 0;
  r.health = &h;
  publish_(r);
}

void ProbeStatsReporter::misses(const ProgramStats& s, const std::string& probes, bool is_final) {
  if (s.recursion_misses)
    health("probe_recursion_misses", s.instance + "/" + probes, s.recursion_misses,
           LOUPE_HEALTH_WARN,
           "the kernel skipped the program because a BPF program was already running on that CPU "
           "(events missed; for a classic tracepoint or kprobe any tracing program counts: the "
           "tp_btf or raw_tp mechanism avoids it)",
           is_final);
}

void ProbeStatsReporter::report_misses(const std::vector<ProgramStats>& now, bool is_final) {
  for (const auto& [id, p] : by_program(now)) misses(*p.stats, join(p.probes), is_final);
}

void ProbeStatsReporter::report(const std::vector<ProgramStats>& now, std::uint64_t mono_ns,
                                std::uint64_t self_cpu_ns, bool is_final) {
  const std::map<std::uint32_t, Program> programs = by_program(now);
  // Interval reports cover the window since the previous one; the final the session.
  const CostWindow w = meter_.measure(now, mono_ns, self_cpu_ns, is_final);
  const double window_s = w.seconds;
  for (const auto& [id, p] : programs) {
    const auto& s = *p.stats;
    const ProgramCost d = w.by_program.count(id) ? w.by_program.at(id) : ProgramCost{};
    const double runs = static_cast<double>(d.runs), ns = static_cast<double>(d.ns);
    const std::string probes = join(p.probes), targets = join(p.targets),
                      id_text = std::to_string(id);
    loupe_label labels[] = {{"instance", s.instance.c_str()},
                            {"program", s.program.c_str()},
                            {"probe", probes.c_str()},
                            {"target", targets.c_str()},
                            {"prog_id", id_text.c_str()}};
    constexpr std::uint32_t n = 5;
    metric("probe_runs", LOUPE_METRIC_COUNTER, "events", static_cast<double>(s.run_cnt), labels, n,
           is_final);
    metric("probe_run_time", LOUPE_METRIC_COUNTER, "ns", static_cast<double>(s.run_time_ns), labels,
           n, is_final);
    metric("probe_avg_ns", LOUPE_METRIC_GAUGE, "ns", runs > 0 ? ns / runs : 0, labels, n, is_final);
    metric("probe_events_per_s", LOUPE_METRIC_GAUGE, "events/s", window_s > 0 ? runs / window_s : 0,
           labels, n, is_final);
    // Time in the program over the time all online CPUs had: what the probe takes from the box.
    metric("probe_cpu_share", LOUPE_METRIC_GAUGE, "ratio",
           window_s > 0 ? ns / (window_s * 1e9 * cpus_) : 0, labels, n, is_final);
    metric("probe_recursion_misses", LOUPE_METRIC_COUNTER, "events",
           static_cast<double>(s.recursion_misses), labels, n, is_final);
    misses(s, probes, is_final);
    if (is_final && s.run_cnt == 0)
      for (const auto& probe : p.probes)
        health("silent_probe", s.instance + "/" + probe, 1, LOUPE_HEALTH_OK,
               fmt::format("program '{}' attached{}{} but never ran during the session", s.program,
                           targets.empty() ? "" : " to ", targets),
               is_final);
  }
  cost(w, is_final);
}

void ProbeStatsReporter::cost(const CostWindow& w, bool is_final) {
  auto percent = [&](double ns) { return w.percent(ns); };
  const double bpf_ns = w.bpf_ns(), self_ns = w.self_ns;
  for (const auto& [instance, c] : w.by_instance) {
    loupe_label labels[] = {{"part", "bpf"}, {"instance", instance.c_str()}};
    metric("cost_cpu_percent", LOUPE_METRIC_GAUGE, "percent", percent(static_cast<double>(c.ns)),
           labels, 2, is_final);
  }
  const double total = w.total_percent();
  for (auto [part, ns] : {std::pair{"bpf", bpf_ns}, std::pair{"threads", self_ns},
                          std::pair{"total", bpf_ns + self_ns}}) {
    loupe_label labels[] = {{"part", part}};
    metric("cost_cpu_percent", LOUPE_METRIC_GAUGE, "percent", percent(ns), labels, 1, is_final);
  }
  if (budget_percent_ <= 0) return;
  // Interval reports are checked one by one; the final report says how many were over.
  if (!is_final) {
    ++reports_;
    if (total > budget_percent_) {
      ++reports_over_;
      if (total > worst_percent_) {
        std::string parts;
        std::vector<std::pair<double, std::string>> by_cost;
        for (const auto& [instance, c] : w.by_instance)
          by_cost.emplace_back(static_cast<double>(c.ns), instance);
        std::sort(by_cost.rbegin(), by_cost.rend());
        for (const auto& [ns, instance] : by_cost)
          parts += fmt::format("{}{} {:.2f}%", parts.empty() ? "" : ", ", instance, percent(ns));
        worst_percent_ = total;
        worst_ = fmt::format(
            "at most {:.2f}% of {} CPUs (BPF programs {:.2f}%{}{}; loupe's threads {:.2f}%)", total,
            cpus_, percent(bpf_ns), parts.empty() ? "" : ": ", parts, percent(self_ns));
      }
    }
  }
  const std::string thinned = thinned_ ? thinned_() : std::string();
  std::string msg =
      reports_over_ == 0
          ? fmt::format("loupe used {:.2f}% of {} CPUs over {}, within max_cpu_percent = {}", total,
                        cpus_, is_final ? "the session" : "the last report", budget_percent_)
          : fmt::format("loupe's cost passed max_cpu_percent = {} in {} of {} reports, {}",
                        budget_percent_, reports_over_, reports_, worst_);
  if (!thinned.empty())
    msg += fmt::format(
        "; thinned to stay within it: {}. Those profilers' counts and times since are "
        "estimates (each kept event weighs its divisor); raise the budget for exact ones",
        thinned);
  else if (reports_over_)
    msg +=
        "; nothing was thinned (no profiler that can be thinned was the cost): lower the "
        "costliest plugin's rate (its frequency or target) or raise the budget";
  health("budget", "loupe/max_cpu_percent", reports_over_,
         reports_over_ ? LOUPE_HEALTH_WARN : LOUPE_HEALTH_OK, msg, is_final);
}

}  // namespace loupe
