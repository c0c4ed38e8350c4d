// SPDX-License-Identifier: Apache-2.0
#ifndef LOUPE_SINKS_CONSOLE_REPORT_SECTIONS_HPP
#define LOUPE_SINKS_CONSOLE_REPORT_SECTIONS_HPP

#include <string>
#include <vector>

#include "report_batch.hpp"
#include "report_text.hpp"

namespace loupe::sinks {

// A report is made of blocks (a table, a histogram, a list) that the page separates with
// a blank line. Each producer's sections append theirs; a section with nothing to show
// appends none.
using Blocks = std::vector<std::string>;

// Metrics, with the histograms' p50/p99/max beside them, as pivot tables (pivot_table.hpp).
// Values without labels go to `headline` ("all_syscalls 3,423"), for the section's title.
void render_metrics(const ProducerRecords& p, const ReportOptions& o, const TextStyle& s,
                    Blocks& blocks, std::string& headline);
// Each histogram: a one-line summary and its bars.
void render_histograms(const ProducerRecords& p, const ReportOptions& o, const TextStyle& s,
                       Blocks& blocks);
void render_stacks(const ProducerRecords& p, const ReportOptions& o, const TextStyle& s,
                   Blocks& blocks);
void render_events(const ProducerRecords& p, const ReportOptions& o, const TextStyle& s,
                   Blocks& blocks);
// Always says whether data was lost, even when no health record arrived: one verdict line
// when nothing was, else the degraded places (errors first) and the verdict.
void render_health(const ReportBatch& b, const ReportOptions& o, const TextStyle& s,
                   Blocks& blocks);

// The host fills percentiles; this fallback (same definition: the bucket holding the
// rank, midpoint clamped to [min, max]) keeps a record from an older host readable.
std::vector<loupe_percentile> percentiles_from_buckets(const HistogramCopy& h);

// Width of the report's rules, derived from the bar width.
inline std::size_t report_width(const ReportOptions& o) {
  return o.bar_width + 46;
}

}  // namespace loupe::sinks

#endif
