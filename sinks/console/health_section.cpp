// SPDX-License-Identifier: Apache-2.0
#include <algorithm>

#include "human_units.hpp"
#include "loupe/report/health_share.hpp"
#include "report_sections.hpp"

namespace loupe::sinks {
namespace {

const char* severity_name(std::uint32_t s) {
  switch (s) {
    case LOUPE_HEALTH_OK: return "OK";
    case LOUPE_HEALTH_WARN: return "WARN";
    case LOUPE_HEALTH_ERROR: return "ERROR";
    default: return "?";
  }
}

// A probe that never fired (docs/records.md: `silent_probe`, `silent_probe_<what>`): a
// target the workload never called, or a filter that kept everything out. Worth knowing,
// but nothing was lost.
bool is_silence(const HealthEntry& e) {
  return e.name.rfind("silent_probe", 0) == 0;
}

// "latency/write", "lockwait (futex)"
std::string silent_where(const HealthEntry& e) {
  std::string s = e.health.component.empty() ? e.name : e.health.component;
  if (e.name.size() > 13 && e.name[12] == '_') s += " (" + e.name.substr(13) + ")";
  return s;
}

// "lost_kernel@ring:outliers (17)"
std::string where(const HealthEntry& e) {
  std::string s = e.name;
  if (!e.health.component.empty()) s += "@" + e.health.component;
  if (!e.labels.empty()) s += "{" + labels_text(e.labels) + "}";
  return s;
}

// "3 of 196 stacks (1.5%) at stacks@cpusample/unwind_bad_frame" when the producer says what
// the count is a part of, else "stacks@cpusample/unwind_bad_frame (3)": a share reads the
// same for 3 of 196 and 3 of 3 million only when there is none to give.
std::string loss_text(const HealthEntry& e) {
  const HealthCopy& h = e.health;
  if (h.whole == 0) return where(e) + " (" + format_count(h.value) + ")";
  return report::health_share(h.value, h.whole, h.whole_unit) + " at " + where(e);
}

}  // namespace

void render_health(const ReportBatch& batch, const ReportOptions& opt, const TextStyle& style,
                   Blocks& blocks) {
  std::string out;
  if (batch.health.empty()) {
    blocks.push_back(style.warn("VERDICT: no health records received: losses are unknown") + "\n");
    return;
  }
  // Errors first, then warnings: what failed outranks what was lost. Rows that are OK are
  // counted in the verdict and listed only in verbose mode; probes that never fired have a
  // line of their own.
  std::vector<const HealthEntry*> rows;
  std::vector<std::string> silent;
  std::size_t checks = 0;
  for (const auto& [key, e] : batch.health) {
    if (is_silence(e)) {
      silent.push_back(silent_where(e));
      continue;
    }
    ++checks;
    if (opt.verbose || e.health.severity != LOUPE_HEALTH_OK) rows.push_back(&e);
  }
  // Interval reports judge the session so far: the health counters run since it began.
  const std::string verdict_head = opt.interval ? "VERDICT so far: " : "VERDICT: ";
  std::string never_fired;
  if (!silent.empty()) {
    constexpr std::size_t kNamed = 6;
    never_fired = "  probes that never fired (not loss):";
    for (std::size_t i = 0; i < silent.size() && i < kNamed; ++i)
      never_fired += (i ? ", " : " ") + silent[i];
    if (silent.size() > kNamed)
      never_fired += ", +" + std::to_string(silent.size() - kNamed) + " more";
    never_fired = style.dim(never_fired) + "\n";
  }
  std::stable_sort(rows.begin(), rows.end(), [](const HealthEntry* a, const HealthEntry* b) {
    return a->health.severity > b->health.severity;
  });

  TextTable table({false, false, false, true, false});
  // WARN values are counts of different things (records, requests, ns of wait time, silent
  // probes), so the verdict names each place with its value (and its share, when the
  // producer gives the whole) instead of summing them. What is not in the report at all
  // (lost) is told from what is in it less exactly (degraded); a producer that does not say
  // (ABI 1.10) keeps the old words.
  std::vector<std::string> lost_where, degraded_where, unsaid_where, warned_where, failed_where;
  // The largest share first in each list; counts without one after, as they came.
  std::vector<std::pair<double, std::string>> lost_by, degraded_by, unsaid_by;
  for (const HealthEntry* e : rows) {
    const HealthCopy& h = e->health;
    table.row({severity_name(h.severity), h.component.empty() ? "-" : h.component,
               e->labels.empty() ? e->name : e->name + "{" + labels_text(e->labels) + "}",
               format_count(h.value), h.message});
    if (h.severity == LOUPE_HEALTH_WARN && h.value > 0)
      (h.effect == LOUPE_HEALTH_EFFECT_LOST       ? lost_by
       : h.effect == LOUPE_HEALTH_EFFECT_DEGRADED ? degraded_by
                                                  : unsaid_by)
          .emplace_back(h.whole ? static_cast<double>(h.value) / static_cast<double>(h.whole) : -1,
                        loss_text(*e));
    else if (h.severity == LOUPE_HEALTH_WARN)
      warned_where.push_back(where(*e) + (h.message.empty() ? "" : ": " + h.message));
    else if (h.severity == LOUPE_HEALTH_ERROR)
      failed_where.push_back(where(*e) + (h.message.empty() ? "" : ": " + h.message));
  }
  for (auto [by, where] :
       {std::pair{&lost_by, &lost_where}, std::pair{&degraded_by, &degraded_where},
        std::pair{&unsaid_by, &unsaid_where}}) {
    std::stable_sort(by->begin(), by->end(),
                     [](const auto& a, const auto& b) { return a.first > b.first; });
    for (auto& [share, text] : *by) where->push_back(std::move(text));
  }
  if (!rows.empty()) {
    out += style.bold(
               rule(opt.after_start ? "HEALTH SUMMARY (since the session began)" : "HEALTH SUMMARY",
                    report_width(opt), "═")) +
           "\n";
    auto lines = table.lines("  ");
    for (std::size_t i = 0; i < lines.size(); ++i) {
      if (rows[i]->health.severity == LOUPE_HEALTH_ERROR)
        out += style.error(lines[i] + "  <<<") + "\n";
      else if (rows[i]->health.severity == LOUPE_HEALTH_WARN)
        out += style.warn(lines[i] + "  <<<") + "\n";
      else
        out += lines[i] + "\n";
    }
  }

  if (lost_where.empty() && degraded_where.empty() && unsaid_where.empty() &&
      warned_where.empty() && failed_where.empty()) {
    out += style.good(verdict_head + "no data lost (" + std::to_string(checks) +
                      " health checks OK)") +
           "\n" + never_fired;
    blocks.push_back(std::move(out));
    return;
  }
  std::string verdict;
  auto part = [&](const std::string& head, const std::vector<std::string>& where) {
    if (where.empty()) return;
    verdict += verdict.empty() ? verdict_head : "; ";
    verdict += head;
    for (std::size_t i = 0; i < where.size(); ++i) verdict += (i ? ", " : "") + where[i];
  };
  part("data lost at " + std::to_string(lost_where.size()) + " place(s): ", lost_where);
  part("data lost or degraded at " + std::to_string(unsaid_where.size()) + " place(s): ",
       unsaid_where);
  // Only degraded: said first that nothing is missing.
  if (lost_where.empty() && unsaid_where.empty() && !degraded_where.empty())
    verdict = verdict_head + "nothing lost";
  part("degraded at " + std::to_string(degraded_where.size()) + " place(s): ", degraded_where);
  part(std::to_string(failed_where.size()) + " component(s) failed: ", failed_where);
  part(std::to_string(warned_where.size()) + " warning(s): ", warned_where);
  const bool bad = !lost_where.empty() || !unsaid_where.empty() || !failed_where.empty();
  out += (bad ? style.error(verdict) : style.warn(verdict)) + "\n" + never_fired;
  blocks.push_back(std::move(out));
}

}  // namespace loupe::sinks
