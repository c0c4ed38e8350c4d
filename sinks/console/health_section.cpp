// SPDX-License-Identifier: Apache-2.0
#include <algorithm>

#include "human_units.hpp"
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

// "lost_kernel@ring:outliers (17)"
std::string where(const HealthEntry& e) {
  std::string s = e.name;
  if (!e.health.component.empty()) s += "@" + e.health.component;
  if (!e.labels.empty()) s += "{" + labels_text(e.labels) + "}";
  return s;
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
  // counted in the verdict and listed only in verbose mode.
  std::vector<const HealthEntry*> rows;
  for (const auto& [key, e] : batch.health)
    if (opt.verbose || e.health.severity != LOUPE_HEALTH_OK) rows.push_back(&e);
  std::stable_sort(rows.begin(), rows.end(), [](const HealthEntry* a, const HealthEntry* b) {
    return a->health.severity > b->health.severity;
  });

  TextTable table({false, false, false, true, false});
  // WARN values are counts of different things (records, requests, ns of wait time, silent
  // probes), so the verdict names each place with its value instead of summing them.
  std::vector<std::string> degraded_where, warned_where, failed_where;
  for (const HealthEntry* e : rows) {
    const HealthCopy& h = e->health;
    table.row({severity_name(h.severity), h.component.empty() ? "-" : h.component,
               e->labels.empty() ? e->name : e->name + "{" + labels_text(e->labels) + "}",
               format_count(h.value), h.message});
    if (h.severity == LOUPE_HEALTH_WARN && h.value > 0)
      degraded_where.push_back(where(*e) + " (" + format_count(h.value) + ")");
    else if (h.severity == LOUPE_HEALTH_WARN)
      warned_where.push_back(where(*e) + (h.message.empty() ? "" : ": " + h.message));
    else if (h.severity == LOUPE_HEALTH_ERROR)
      failed_where.push_back(where(*e) + (h.message.empty() ? "" : ": " + h.message));
  }
  if (!rows.empty()) {
    out += style.bold(rule("HEALTH SUMMARY", report_width(opt), "═")) + "\n";
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

  if (degraded_where.empty() && warned_where.empty() && failed_where.empty()) {
    out += style.good("VERDICT: no data lost (" + std::to_string(batch.health.size()) +
                      " health checks OK)") +
           "\n";
    blocks.push_back(std::move(out));
    return;
  }
  std::string verdict;
  auto part = [&](const std::string& head, const std::vector<std::string>& where) {
    if (where.empty()) return;
    verdict += verdict.empty() ? "VERDICT: " : "; ";
    verdict += head;
    for (std::size_t i = 0; i < where.size(); ++i) verdict += (i ? ", " : "") + where[i];
  };
  part("data lost or degraded at " + std::to_string(degraded_where.size()) + " place(s): ",
       degraded_where);
  part(std::to_string(failed_where.size()) + " component(s) failed: ", failed_where);
  part(std::to_string(warned_where.size()) + " warning(s): ", warned_where);
  const bool bad = !degraded_where.empty() || !failed_where.empty();
  out += (bad ? style.error(verdict) : style.warn(verdict)) + "\n";
  blocks.push_back(std::move(out));
}

}  // namespace loupe::sinks
