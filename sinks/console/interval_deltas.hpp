// SPDX-License-Identifier: Apache-2.0
#ifndef LOUPE_SINKS_CONSOLE_INTERVAL_DELTAS_HPP
#define LOUPE_SINKS_CONSOLE_INTERVAL_DELTAS_HPP

#include <map>
#include <string>

#include "report_batch.hpp"

namespace loupe::sinks {

// An interval report keeps one window, the interval's. Producers send some series as
// running totals since the session began (their records' window says so) and others as the
// interval's increments; apply() turns the counters and histograms of the first kind into
// their increase since the previous interval report, so that `calls` and a histogram's
// `count` in one row count the same calls. What has no increment (a gauge, a stack sample
// whose values may be states such as live bytes) stays as sent and keeps its since_start
// mark, for the report to say so. The final report covers the session and needs none of it.
class IntervalDeltas {
 public:
  void apply(ReportBatch& batch);

 private:
  std::map<std::string, double> counters_;           // by producer, name and series
  std::map<std::string, HistogramCopy> histograms_;  // by producer and series
};

// `now` minus `before`, bucket by bucket, with the [min, max] the remaining buckets allow.
HistogramCopy histogram_increase(const HistogramCopy& now, const HistogramCopy& before);

}  // namespace loupe::sinks

#endif
