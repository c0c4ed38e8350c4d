// SPDX-License-Identifier: Apache-2.0
#include "human_units.hpp"
#include "report_sections.hpp"

namespace loupe::sinks {

void render_metrics(const ReportBatch& batch, const ReportOptions& opt, const TextStyle& style,
                    std::string& out) {
  if (batch.metrics.empty()) return;
  out += style.bold(rule("METRICS", report_width(opt), "═")) + "\n";
  for (const auto& [name, series] : batch.metrics) {
    out += "\n  " + style.bold(name) + "\n";
    TextTable table({false, false, true, false});
    table.row({"labels", "type", "value", "unit"});
    for (const auto& [key, m] : series) {
      const MetricCopy& v = m.metric;
      const char* type = v.type == LOUPE_METRIC_COUNTER ? "counter"
                         : v.type == LOUPE_METRIC_GAUGE ? "gauge"
                                                        : "metric";
      table.row({key.empty() ? "-" : key, type, format_quantity(v.value, v.unit),
                 v.unit.empty() ? "-" : v.unit});
    }
    auto lines = table.lines("    ");
    for (std::size_t i = 0; i < lines.size(); ++i)
      out += (i == 0 ? style.dim(lines[i]) : lines[i]) + "\n";
  }
  out += "\n";
}

}  // namespace loupe::sinks
