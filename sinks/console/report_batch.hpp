// SPDX-License-Identifier: Apache-2.0
#ifndef LOUPE_SINKS_CONSOLE_REPORT_BATCH_HPP
#define LOUPE_SINKS_CONSOLE_REPORT_BATCH_HPP

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "loupe/abi/records.h"
#include "record_copy.hpp"

namespace loupe::sinks {

// `since_start`: the record's window began with the session (docs/records.md): its values
// count since then, where the others count a later window (an interval's increments).
struct HistogramSeries {
  std::string name;
  Labels labels;
  HistogramCopy hist;
  bool since_start = false;
};

struct MetricSeries {
  Labels labels;
  MetricCopy metric;
  bool since_start = false;
};

struct StackEntry {
  Labels labels;
  std::vector<FrameCopy> frames;
  std::vector<ValueCopy> values;
  bool since_start = false;
};

// The numeric field an event is ranked by ("slow calls"), chosen by name only: sinks know
// records, not plugins.
struct EventMagnitude {
  std::string key;
  double value = 0;
  std::string unit;  // "ns", ... derived from the key suffix; empty when unknown
};
std::optional<EventMagnitude> event_magnitude(const EventCopy& e);

struct RankedEvent {
  Labels labels;
  EventCopy event;
  std::optional<EventMagnitude> magnitude;
};

// Per event name: exact count, and bounded samples (the N slowest and the N latest) so a
// flood of events cannot grow the report without bound.
struct EventLog {
  std::uint64_t count = 0;
  std::vector<RankedEvent> slowest;  // descending magnitude
  std::vector<RankedEvent> latest;   // ring of the last N, oldest first after ordered()
  std::size_t latest_next = 0;
  std::vector<RankedEvent> latest_ordered() const;
  // Counts the event and keeps it when it is among the `keep` slowest or latest.
  void add(RankedEvent ranked, std::size_t keep);
  bool any_final = false;  // an event of the final report itself (a snapshot, not an occurrence)
};

struct HealthEntry {
  std::string name;
  Labels labels;
  HealthCopy health;
};

// One producer's records since the last flush. Histograms and metrics keep their latest
// value per series (producers send snapshots); stack samples with the same frames and
// labels are summed. `order` lists metric and histogram names as they first arrived: the
// producer's own order is the best column order a sink that knows no plugin can find.
struct ProducerRecords {
  std::map<std::string, HistogramSeries> histograms;                   // by series
  std::map<std::string, std::map<std::string, MetricSeries>> metrics;  // by name, series
  std::map<std::string, std::map<std::string, StackEntry>> stacks;     // by name, stack
  std::map<std::string, EventLog> events;                              // by name
  std::vector<std::pair<double, std::string>> findings;                // weight, "rule: statement"
  std::vector<std::string> order;
  // Stack names as they first arrived: the first is the profiler's primary view (cpu,
  // offcpu, lock_wait, alloc_sites), which the flat table sums and a cut report keeps.
  std::vector<std::string> stack_order;
  bool has_data() const {
    return !histograms.empty() || !metrics.empty() || !stacks.empty() || !events.empty() ||
           !findings.empty();
  }
};

// What arrived since the last flush, by producer (loupe_record.plugin), plus the health
// stream, which the report judges as a whole.
class ReportBatch {
 public:
  // `session_start_ns`: when the session began (0 = unknown: no record counts as since start).
  ReportBatch(std::size_t keep_events, std::uint64_t session_start_ns)
      : keep_events_(keep_events), session_start_ns_(session_start_ns) {}

  void add(const loupe_record& rec);
  bool empty() const { return n_records_ == 0; }
  std::uint64_t n_records() const { return n_records_; }

  std::map<std::string, ProducerRecords> producers;  // by instance name
  std::vector<std::string> arrival;                  // producers in first-arrival order
  std::map<std::string, HealthEntry> health;         // by component, name, labels
  std::uint64_t window_end_ns = 0;  // the latest record's: where the report's window ends

 private:
  void add_stack(ProducerRecords& p, const std::string& name, Labels labels,
                 const loupe_stack_sample& s, bool since_start);
  bool since_start(const loupe_record& rec) const {
    return session_start_ns_ && rec.window_start_ns <= session_start_ns_;
  }

  std::size_t keep_events_;
  std::uint64_t session_start_ns_;
  std::uint64_t n_records_ = 0;
};

}  // namespace loupe::sinks

#endif
