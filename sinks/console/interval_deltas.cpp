// SPDX-License-Identifier: Apache-2.0
#include "interval_deltas.hpp"

#include <algorithm>
#include <utility>

namespace loupe::sinks {

HistogramCopy histogram_increase(const HistogramCopy& now, const HistogramCopy& before) {
  std::map<std::pair<std::uint64_t, std::uint64_t>, std::uint64_t> had;
  for (const auto& b : before.buckets) had[{b.lower, b.upper}] += b.count;
  HistogramCopy d = now;
  d.buckets.clear();
  d.percentiles.clear();  // derived again from the remaining buckets
  for (const auto& b : now.buckets) {
    const std::uint64_t old = had[{b.lower, b.upper}];
    if (b.count > old) d.buckets.push_back({b.lower, b.upper, b.count - old});
  }
  d.count = now.count - std::min(now.count, before.count);
  d.sum = now.sum - std::min(now.sum, before.sum);
  if (d.buckets.empty()) {
    d.min = d.max = 0;
    return d;
  }
  // The session's min and max hold for the interval only where its buckets allow them.
  d.min = std::max(now.min, d.buckets.front().lower);
  const std::uint64_t top = d.buckets.back().upper;
  d.max = std::min(now.max, top == UINT64_MAX ? top : top - 1);
  return d;
}

void IntervalDeltas::apply(ReportBatch& batch) {
  for (auto& [producer, p] : batch.producers) {
    for (auto& [name, by_series] : p.metrics)
      for (auto& [key, s] : by_series) {
        if (!s.since_start || s.metric.type != LOUPE_METRIC_COUNTER) continue;
        double& before = counters_[producer + '\x1f' + name + '\x1f' + key];
        const double total = s.metric.value;
        s.metric.value = total - std::min(before, total);
        before = total;
        s.since_start = false;
      }
    for (auto& [key, s] : p.histograms) {
      if (!s.since_start) continue;
      HistogramCopy& before = histograms_[producer + '\x1f' + key];
      HistogramCopy total = s.hist;
      s.hist = histogram_increase(total, before);
      before = std::move(total);
      s.since_start = false;
    }
  }
}

}  // namespace loupe::sinks
