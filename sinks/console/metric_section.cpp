// SPDX-License-Identifier: Apache-2.0
#include <algorithm>

#include "human_units.hpp"
#include "pivot_table.hpp"
#include "report_sections.hpp"

namespace loupe::sinks {
namespace {

constexpr std::size_t kNamedZeroRows = 5;
// A label value (a path, an address) wider than this is elided in its middle.
constexpr std::size_t kLabelColumns = 40;
constexpr std::size_t kNarrowestLabel = 8;

bool is_number(const std::string& s) {
  return !s.empty() && s.find_first_not_of("0123456789") == std::string::npos;
}

std::string joined(const std::vector<std::string>& items, std::size_t most) {
  std::string out;
  for (std::size_t i = 0; i < items.size() && i < most; ++i) out += (i ? ", " : "") + items[i];
  if (items.size() > most) out += ", +" + std::to_string(items.size() - most) + " more";
  return out;
}

std::vector<std::string> elided(const std::vector<std::string>& items) {
  std::vector<std::string> out;
  for (const auto& i : items) out.push_back(elide_middle(i, kLabelColumns));
  return out;
}

// The table's first `top` rows, in as many parts as its columns need to fit the width:
// each part repeats the label columns, so every row reads across its own line. Rows left
// out are counted, with their share of the first column when it adds up.
void render_table(const PivotTable& t, const ReportOptions& opt, const TextStyle& style,
                  std::string& out) {
  const std::size_t shown = std::min(t.rows.size(), opt.top);
  const std::size_t nl = t.label_keys.size();
  // Label values that are all numbers (a pid, a syscall nr) align like numbers.
  std::vector<bool> right(nl, true);
  for (std::size_t r = 0; r < shown; ++r)
    for (std::size_t i = 0; i < nl; ++i)
      right[i] = right[i] && is_number(t.rows[r].labels[i].second);

  std::vector<std::size_t> cap(nl, kLabelColumns);
  std::vector<std::size_t> label_w(nl), value_w(t.columns.size());
  auto measure = [&] {
    for (std::size_t i = 0; i < nl; ++i) {
      label_w[i] = display_width(t.label_keys[i]);
      for (std::size_t r = 0; r < shown; ++r)
        label_w[i] =
            std::max(label_w[i], std::min(cap[i], display_width(t.rows[r].labels[i].second)));
    }
  };
  measure();
  for (std::size_t i = 0; i < t.columns.size(); ++i) {
    value_w[i] = display_width(t.columns[i]);
    for (std::size_t r = 0; r < shown; ++r)
      value_w[i] = std::max(
          value_w[i], display_width(t.rows[r].cells[i].present ? t.rows[r].cells[i].text : "-"));
  }
  // The labels keep two thirds of the width at most: their widest column gives way first.
  auto labels_width = [&] {
    std::size_t w = 2;
    for (std::size_t i = 0; i < nl; ++i) w += label_w[i] + 2;
    return w;
  };
  while (labels_width() > opt.width * 2 / 3) {
    auto widest = std::max_element(label_w.begin(), label_w.end());
    if (widest == label_w.end() || *widest <= kNarrowestLabel) break;
    cap[widest - label_w.begin()] = *widest - 1;
    measure();
  }

  // Value columns in parts that fit beside the labels; a part holds one column at least.
  std::vector<std::pair<std::size_t, std::size_t>> parts;  // [begin, end) of columns
  for (std::size_t i = 0, used = labels_width(); i < t.columns.size(); ++i) {
    if (parts.empty() || used + value_w[i] > opt.width) {
      parts.push_back({i, i});
      used = labels_width();
    }
    parts.back().second = i + 1;
    used += value_w[i] + 2;
  }
  for (const auto& [begin, end] : parts) {
    std::vector<bool> align = right;
    align.resize(nl + (end - begin), true);
    TextTable table(align);
    std::vector<std::string> header = t.label_keys;
    header.insert(header.end(), t.columns.begin() + static_cast<std::ptrdiff_t>(begin),
                  t.columns.begin() + static_cast<std::ptrdiff_t>(end));
    table.row(std::move(header));
    for (std::size_t r = 0; r < shown; ++r) {
      std::vector<std::string> cells;
      for (std::size_t i = 0; i < nl; ++i) {
        const std::string& v = t.rows[r].labels[i].second;
        cells.push_back(v.empty() ? "-" : elide_middle(v, cap[i]));
      }
      for (std::size_t c = begin; c < end; ++c)
        cells.push_back(t.rows[r].cells[c].present ? t.rows[r].cells[c].text : "-");
      table.row(std::move(cells));
    }
    auto lines = table.lines("  ");
    for (std::size_t i = 0; i < lines.size(); ++i)
      out += (i == 0 ? style.dim(lines[i]) : lines[i]) + "\n";
  }
  if (t.rows.size() > shown) {
    std::string more = "… " + std::to_string(t.rows.size() - shown) + " more row(s)";
    if (!t.columns.empty() && t.summable[0]) {
      double all = 0, left = 0;
      for (std::size_t r = 0; r < t.rows.size(); ++r) {
        const PivotCell& c = t.rows[r].cells[0];
        if (!c.present) continue;
        all += c.value;
        if (r >= shown) left += c.value;
      }
      if (all > 0) more += " with " + format_percent(left / all) + " of " + t.columns[0];
    }
    out += "  " + style.dim(more + " (console top = " + std::to_string(opt.top) + ")") + "\n";
  }
}

// `head` and as many of `items` (at most kNamedZeroRows) as one line of `width` holds,
// the rest counted.
std::string named_within(const std::string& head, const std::vector<std::string>& items,
                         std::size_t width) {
  std::size_t n = std::min(items.size(), kNamedZeroRows);
  for (; n > 1; --n)
    if (display_width(head + joined(items, n)) <= width) break;
  return head + joined(items, n);
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
           style.dim(named_within(std::to_string(t.zero_rows.size()) + " all-zero row(s): ",
                                  elided(t.zero_rows), opt.width - 2)) +
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
    if (!t.rows.empty()) render_table(t, opt, style, out);
    render_zeros(t, opt, style, out);
    if (!out.empty()) blocks.push_back(std::move(out));
  }
}

}  // namespace loupe::sinks
