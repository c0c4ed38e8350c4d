// SPDX-License-Identifier: Apache-2.0
#ifndef LOUPE_SINKS_CONSOLE_PIVOT_TABLE_HPP
#define LOUPE_SINKS_CONSOLE_PIVOT_TABLE_HPP

#include <cstddef>
#include <string>
#include <vector>

#include "report_batch.hpp"

namespace loupe::sinks {

// One producer's metrics and histogram summaries, pivoted the way funclatency or
// `perf report` put them on one screen: the series that share a set of label keys become
// one table, a row per label values, a column per metric name, and a histogram of the same
// label keys adds its p50, p99 and max to the row. Which names are shown together follows
// from the labels alone, so it holds for any producer.
struct PivotCell {
  bool present = false;
  double value = 0;
  std::string text;
};

struct PivotTable {
  struct Row {
    Labels labels;  // in label_keys order
    std::vector<PivotCell> cells;
  };
  std::vector<std::string> label_keys;  // as the group's first series ordered them
  std::vector<std::string> columns;
  std::size_t metric_columns = 0;  // the first ones; the rest summarize histograms
  // Per column: whether its cells add up to a total (calls, bytes, a histogram's count),
  // unlike a ratio or a percentile, so that rows left out can be given their share.
  std::vector<bool> summable;
  std::vector<Row> rows;  // by the first shown column, largest first
  // With zeros hidden: the columns with no non-zero cell, and the rows (label text) with
  // none; the report names them so that nothing disappears without a word.
  std::vector<std::string> zero_columns;
  std::vector<std::string> zero_rows;
  // Metric columns whose values count since the session began (a series' since_start),
  // in a report that counts another window.
  std::vector<std::string> since_start_columns;
};

// Tables in the order their first name arrived. hide_zeros drops zero-only columns and
// rows (listed in zero_columns / zero_rows instead).
std::vector<PivotTable> pivot_tables(const ProducerRecords& p, bool hide_zeros);

// A metric value as a table cell: a ratio as a percentage, else with its unit (none for
// counts).
std::string metric_cell_text(double value, const std::string& unit);

}  // namespace loupe::sinks

#endif
