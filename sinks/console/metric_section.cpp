// SPDX-License-Identifier: Apache-2.0
#include "human_units.hpp"
#include "pivot_table.hpp"
#include "report_sections.hpp"

namespace loupe::sinks {
namespace {

constexpr std::size_t kNamedZeroRows = 5;

bool is_number(const std::string& s) {
  return !s.empty() && s.find_first_not_of("0123456789") == std::string::npos;
}

std::string joined(const std::vector<std::string>& items, std::size_t most) {
  std::string out;
  for (std::size_t i = 0; i < items.size() && i < most; ++i) out += (i ? ", " : "") + items[i];
  if (items.size() > most) out += ", +" + std::to_string(items.size() - most) + " more";
  return out;
}

void render_zeros(const PivotTable& t, const ReportOptions& opt, const TextStyle& style,
                  std::string& out) {
  if (opt.after_start && !t.since_start_columns.empty())
    out += "  " + style.dim("since the session began: " + joined(t.since_start_columns, SIZE_MAX)) +
           "\n";
  if (!t.zero_columns.empty())
    out += "  " + style.dim("all zero: " + joined(t.zero_columns, t.zero_columns.size())) + "\n";
  if (!t.zero_rows.empty())
    out += "  " +
           style.dim(std::to_string(t.zero_rows.size()) +
                     " all-zero row(s): " + joined(t.zero_rows, kNamedZeroRows)) +
           "\n";
}

}  // namespace

void render_metrics(const ProducerRecords& p, const ReportOptions& opt, const TextStyle& style,
                    Blocks& blocks, std::string& headline) {
  for (const PivotTable& t : pivot_tables(p, !opt.verbose)) {
    std::string out;
    // A histogram alone, without labels to compare it by: its own summary line says it.
    if (t.metric_columns == 0 && t.rows.size() + t.zero_rows.size() <= 1 && !opt.verbose) continue;
    if (t.label_keys.empty()) {
      // Values of no label set are the producer's headline: name and value pairs.
      for (const auto& r : t.rows)
        for (std::size_t i = 0; i < r.cells.size(); ++i)
          headline += (headline.empty() ? "" : "  ") + t.columns[i] + " " +
                      (r.cells[i].present ? r.cells[i].text : "-");
      render_zeros(t, opt, style, out);
      if (!out.empty()) blocks.push_back(std::move(out));
      continue;
    }
    if (!t.rows.empty()) {
      // Label values that are all numbers (a pid, a syscall nr) align like numbers.
      std::vector<bool> right(t.label_keys.size(), true);
      for (const auto& r : t.rows)
        for (std::size_t i = 0; i < r.labels.size(); ++i)
          right[i] = right[i] && is_number(r.labels[i].second);
      right.resize(t.label_keys.size() + t.columns.size(), true);
      TextTable table(right);
      std::vector<std::string> header = t.label_keys;
      header.insert(header.end(), t.columns.begin(), t.columns.end());
      table.row(std::move(header));
      for (const auto& r : t.rows) {
        std::vector<std::string> cells;
        for (const auto& kv : r.labels) cells.push_back(kv.second.empty() ? "-" : kv.second);
        for (const auto& c : r.cells) cells.push_back(c.present ? c.text : "-");
        table.row(std::move(cells));
      }
      auto lines = table.lines("  ");
      for (std::size_t i = 0; i < lines.size(); ++i)
        out += (i == 0 ? style.dim(lines[i]) : lines[i]) + "\n";
    }
    render_zeros(t, opt, style, out);
    if (!out.empty()) blocks.push_back(std::move(out));
  }
}

}  // namespace loupe::sinks
