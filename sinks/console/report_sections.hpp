// SPDX-License-Identifier: Apache-2.0
#ifndef LOUPE_SINKS_CONSOLE_REPORT_SECTIONS_HPP
#define LOUPE_SINKS_CONSOLE_REPORT_SECTIONS_HPP

#include <string>
#include <vector>

#include "report_batch.hpp"
#include "report_text.hpp"

namespace loupe::sinks {

// Each section appends its text to `out` and prints nothing when it has no records.
void render_histograms(const ReportBatch& b, const ReportOptions& o, const TextStyle& s,
                       std::string& out);
void render_metrics(const ReportBatch& b, const ReportOptions& o, const TextStyle& s,
                    std::string& out);
void render_stacks(const ReportBatch& b, const ReportOptions& o, const TextStyle& s,
                   std::string& out);
void render_events(const ReportBatch& b, const ReportOptions& o, const TextStyle& s,
                   std::string& out);
// Always prints: a report must say whether it is complete, even when nothing was received.
void render_health(const ReportBatch& b, const ReportOptions& o, const TextStyle& s,
                   std::string& out);

// The host fills percentiles; this fallback (same definition: the bucket holding the
// rank, midpoint clamped to [min, max]) keeps a record from an older host readable.
std::vector<loupe_percentile> percentiles_from_buckets(const HistogramCopy& h);

// Width of the report's rules, derived from the bar width.
inline std::size_t report_width(const ReportOptions& o) {
  return o.bar_width + 46;
}

}  // namespace loupe::sinks

#endif
