// SPDX-License-Identifier: Apache-2.0
#include "pivot_table.hpp"

#include <algorithm>
#include <cmath>
#include <map>
#include <set>
#include <type_traits>

#include "human_units.hpp"
#include "report_sections.hpp"

namespace loupe::sinks {
namespace {

// Series with the same keys in another order are one row, and one table.
Labels sorted(Labels labels) {
  std::sort(labels.begin(), labels.end());
  return labels;
}
std::string key_set(const Labels& labels) {
  std::string out;
  for (const auto& kv : sorted(labels)) out += kv.first + '\x1f';
  return out;
}

struct Group {
  std::vector<std::string> label_keys;
  std::vector<std::string> metric_names, histogram_names;
  std::set<std::string> since_start;   // metric names with a series since the session began
  std::map<std::string, Labels> rows;  // canonical label text -> labels as first seen
  std::size_t first = SIZE_MAX;        // position of its first name in the producer's order
};

std::size_t position(const std::vector<std::string>& order, const std::string& name) {
  return static_cast<std::size_t>(std::find(order.begin(), order.end(), name) - order.begin());
}

void note(Group& g, std::vector<std::string>& names, const std::string& name, const Labels& labels,
          std::size_t pos) {
  if (std::find(names.begin(), names.end(), name) == names.end()) names.push_back(name);
  if (g.label_keys.empty() && g.rows.empty())
    for (const auto& kv : labels) g.label_keys.push_back(kv.first);
  g.rows.try_emplace(labels_text(sorted(labels)), labels);
  g.first = std::min(g.first, pos);
}

std::uint64_t percentile(const HistogramCopy& h, double q) {
  const std::vector<loupe_percentile>& given = h.percentiles;
  std::vector<loupe_percentile> derived;
  if (given.empty()) derived = percentiles_from_buckets(h);
  for (const auto& p : given.empty() ? derived : given)
    if (std::fabs(p.quantile - q) < 1e-9) return p.value;
  return 0;
}

bool is_zero(const PivotCell& c) {
  return !c.present || c.value == 0;
}

}  // namespace

std::string metric_cell_text(double value, const std::string& unit) {
  if (unit == "ratio") return format_number(value * 100.0) + "%";
  return format_quantity(value, unit);
}

std::vector<PivotTable> pivot_tables(const ProducerRecords& p, bool hide_zeros) {
  std::map<std::string, Group> groups;  // by label key set
  // Cells by name and canonical label text.
  std::map<std::string, std::map<std::string, const MetricCopy*>> metrics;
  std::map<std::string, std::map<std::string, const HistogramCopy*>> histograms;
  for (const auto& [name, series] : p.metrics)
    for (const auto& [key, m] : series) {
      Group& g = groups[key_set(m.labels)];
      note(g, g.metric_names, name, m.labels, position(p.order, name));
      if (m.since_start) g.since_start.insert(name);
      metrics[name][labels_text(sorted(m.labels))] = &m.metric;
    }
  for (const auto& [key, h] : p.histograms) {
    Group& g = groups[key_set(h.labels)];
    note(g, g.histogram_names, h.name, h.labels, position(p.order, h.name));
    histograms[h.name][labels_text(sorted(h.labels))] = &h.hist;
  }
  auto find = [](const auto& by_name, const std::string& name, const std::string& canonical) {
    using Ptr = typename std::decay_t<decltype(by_name)>::mapped_type::mapped_type;
    auto s = by_name.find(name);
    if (s == by_name.end()) return Ptr{};
    auto c = s->second.find(canonical);
    return c == s->second.end() ? Ptr{} : c->second;
  };

  std::vector<const Group*> ordered;
  for (auto& [keys, g] : groups) {
    auto by_arrival = [&p](const std::string& a, const std::string& b) {
      return position(p.order, a) < position(p.order, b);
    };
    std::sort(g.metric_names.begin(), g.metric_names.end(), by_arrival);
    std::sort(g.histogram_names.begin(), g.histogram_names.end(), by_arrival);
    ordered.push_back(&g);
  }
  std::stable_sort(ordered.begin(), ordered.end(),
                   [](const Group* a, const Group* b) { return a->first < b->first; });

  std::vector<PivotTable> out;
  for (const Group* g : ordered) {
    PivotTable t;
    t.label_keys = g->label_keys;
    t.columns = g->metric_names;
    t.metric_columns = t.columns.size();
    for (const auto& name : g->metric_names) {
      auto s = metrics.find(name);
      const bool ratio =
          s != metrics.end() && !s->second.empty() && s->second.begin()->second->unit == "ratio";
      t.summable.push_back(!ratio);
    }
    // Without labels there is no row to compare: such a histogram says its figures on its
    // own summary line.
    const std::vector<std::string> histogram_names =
        t.label_keys.empty() ? std::vector<std::string>{} : g->histogram_names;
    const bool one_histogram = histogram_names.size() == 1;
    // A histogram alone in its table is ranked by its count; beside metrics, the metrics
    // say how many (calls, bytes) and the histogram how long.
    const bool with_count = g->metric_names.empty();
    for (const auto& h : histogram_names)
      for (const char* stat : {"count", "p50", "p99", "max"}) {
        if (std::string(stat) == "count" && !with_count) continue;
        t.columns.push_back(one_histogram ? stat : h + " " + stat);
        t.summable.push_back(std::string(stat) == "count");
      }
    if (t.columns.empty()) continue;

    for (const auto& [canonical, labels] : g->rows) {
      PivotTable::Row row;
      for (const auto& k : t.label_keys) {
        auto it = std::find_if(labels.begin(), labels.end(),
                               [&k](const auto& kv) { return kv.first == k; });
        row.labels.emplace_back(k, it == labels.end() ? "" : it->second);
      }
      for (const auto& name : g->metric_names) {
        PivotCell c;
        if (const MetricCopy* m = find(metrics, name, canonical))
          c = {true, m->value, metric_cell_text(m->value, m->unit)};
        row.cells.push_back(std::move(c));
      }
      for (const auto& name : histogram_names) {
        const HistogramCopy* h = find(histograms, name, canonical);
        auto cell = [h](double v, const std::string& text) {
          return h && h->count ? PivotCell{true, v, text} : PivotCell{};
        };
        if (with_count)
          row.cells.push_back(
              cell(h ? static_cast<double>(h->count) : 0, h ? format_count(h->count) : ""));
        for (double q : {0.5, 0.99}) {
          double v = h ? static_cast<double>(percentile(*h, q)) : 0;
          row.cells.push_back(cell(v, h ? format_quantity(v, h->unit) : ""));
        }
        double max = h ? static_cast<double>(h->max) : 0;
        row.cells.push_back(cell(max, h ? format_quantity(max, h->unit) : ""));
      }
      t.rows.push_back(std::move(row));
    }

    if (hide_zeros) {
      std::vector<bool> keep(t.columns.size(), false);
      for (const auto& r : t.rows)
        for (std::size_t i = 0; i < r.cells.size(); ++i) keep[i] = keep[i] || !is_zero(r.cells[i]);
      std::vector<PivotTable::Row> rows;
      for (auto& r : t.rows) {
        if (std::all_of(r.cells.begin(), r.cells.end(), is_zero))
          t.zero_rows.push_back(labels_text(r.labels));
        else
          rows.push_back(std::move(r));
      }
      t.rows = std::move(rows);
      std::vector<std::string> columns;
      std::vector<bool> summable;
      std::size_t metric_columns = 0;
      for (std::size_t i = 0; i < t.columns.size(); ++i) {
        if (!keep[i]) {
          t.zero_columns.push_back(t.columns[i]);
          continue;
        }
        columns.push_back(t.columns[i]);
        summable.push_back(t.summable[i]);
        if (i < t.metric_columns) ++metric_columns;
      }
      for (auto& r : t.rows) {
        std::vector<PivotCell> cells;
        for (std::size_t i = 0; i < r.cells.size(); ++i)
          if (keep[i]) cells.push_back(std::move(r.cells[i]));
        r.cells = std::move(cells);
      }
      t.columns = std::move(columns);
      t.summable = std::move(summable);
      t.metric_columns = metric_columns;
    }
    for (std::size_t i = 0; i < t.metric_columns; ++i)
      if (g->since_start.count(t.columns[i])) t.since_start_columns.push_back(t.columns[i]);

    std::stable_sort(
        t.rows.begin(), t.rows.end(), [](const PivotTable::Row& a, const PivotTable::Row& b) {
          double va = a.cells.empty() || !a.cells[0].present ? -INFINITY : a.cells[0].value;
          double vb = b.cells.empty() || !b.cells[0].present ? -INFINITY : b.cells[0].value;
          return va > vb;
        });
    out.push_back(std::move(t));
  }
  return out;
}

}  // namespace loupe::sinks
