// SPDX-License-Identifier: Apache-2.0
#include "human_units.hpp"
#include "report_sections.hpp"

namespace loupe::sinks {
namespace {

// The unit has its own column: the value carries one only when it was rescaled (µs, MiB).
std::string metric_value(double value, const std::string& unit) {
  if (unit == "ratio") return format_number(value * 100.0) + "%";
  std::string q = format_quantity(value, unit);
  if (!unit.empty() && q.size() > unit.size() + 1 &&
      q.compare(q.size() - unit.size() - 1, std::string::npos, " " + unit) == 0)
    q.resize(q.size() - unit.size() - 1);
  return q;
}

}  // namespace

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
      table.row({key.empty() ? "-" : key, type, metric_value(v.value, v.unit),
                 v.unit.empty() ? "-" : v.unit});
    }
    auto lines = table.lines("    ");
    for (std::size_t i = 0; i < lines.size(); ++i)
      out += (i == 0 ? style.dim(lines[i]) : lines[i]) + "\n";
  }
  out += "\n";
}

}  // namespace loupe::sinks
