// SPDX-License-Identifier: Apache-2.0
//
// Every series as Prometheus text or protobuf. Records arrive when profilers collect (every
// session interval, and once at the end); a scrape may come at any time, so the store keeps,
// per series, its value for the life of the endpoint and renders it on demand.
//
// Counters and histograms are cumulative, as Prometheus requires (rate() reads a drop as a
// reset), whatever window a record covers: a record whose window starts at the session's
// start carries totals and replaces the series (never lowering it); one whose window starts
// later carries that window's increments, which are added. Gauges and health keep the latest.
//
// Naming (prefix "loupe_" by default; units converted to Prometheus' base units):
//   histogram  <prefix><name>_seconds|_bytes|_<unit>  _bucket{le}, _sum, _count
//   counter    <prefix><name>[_unit]_total
//   gauge      <prefix><name>[_unit]
//   event      <prefix><name>_events_total        (one per event record received)
//   health     <prefix>health_<name>{component}   + <prefix>health_severity{check,component}
// Every series carries the record's labels plus `plugin`.
//
// In protobuf a histogram is also native (schema 0, with its classic buckets) when its
// buckets fit one (native_histogram.hpp) and its unit needs no scaling. Scaling by 1e-9
// would move every power of two off the schema's bounds, so a time histogram keeps its
// classic family in seconds and gains a protobuf-only native twin in the recorded unit:
//   <prefix><name>_nanoseconds|_microseconds|_milliseconds
#ifndef LOUPE_SINKS_PROMETHEUS_METRIC_STORE_HPP
#define LOUPE_SINKS_PROMETHEUS_METRIC_STORE_HPP

#include <cstdint>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "exposition_text.hpp"
#include "loupe/abi/records.h"
#include "native_histogram.hpp"

namespace loupe::sinks {

// A classic histogram's `le` bounds: 2^lo .. 2^hi of the recorded unit (and 0 before them
// when lo is 0), every one served from the series' first scrape on, zero or not. A bound
// that appeared only once its bucket had a count would arrive holding every count below it,
// which rate() never sees, and histogram_quantile() over rate() would then put a median
// among the slow calls (3.4 ms for loupe's 0.41 ms on a host busy with two emulated
// guests). Prometheus asks for fixed buckets for that.
struct ClassicGrid {
  int lo = 0;
  int hi = 32;
};

class MetricStore {
 public:
  // `session_start_ns`: CLOCK_REALTIME of the session's start (loupe_session_info), which
  // tells totals from increments; 0 = unknown: every record is taken as totals.
  explicit MetricStore(std::string prefix, std::uint64_t session_start_ns = 0)
      : prefix_(std::move(prefix)), session_start_ns_(session_start_ns) {}

  // Thread-safe. Returns false when the record was not stored: a stack sample, or a
  // series whose family already exists with another type or from another record name
  // (`why` says which).
  bool update(const loupe_record& rec, std::string* why = nullptr);

  // Thread-safe. loupe's own series, without labels (`name` gets the prefix): set from the
  // start, so the first scrape has them before any profiler reported.
  void set_own(const std::string& name, const char* type, const std::string& help, double value);

  // Thread-safe. The whole exposition, families in name order: the text format (0.0.4),
  // or length-delimited io.prometheus.client.MetricFamily messages.
  std::string render() const;
  std::string render_protobuf() const;

  std::size_t families() const;

 private:
  // A histogram's counts in the recorded unit, summed over the records that fed it.
  struct HistogramTotals {
    std::vector<loupe_bucket> buckets;  // ascending, non-empty
    std::uint64_t count = 0;
    std::uint64_t sum = 0;
  };
  struct Series {
    Labels labels;
    double value = 0;  // counter, gauge
    // histogram: classic buckets (inclusive upper bound in the base unit, cumulative count)
    // without +Inf, then count and sum; `native` when it fits schema 0.
    std::vector<std::pair<double, std::uint64_t>> classic;
    std::uint64_t count = 0;
    double sum = 0;
    std::optional<NativeHistogram> native;
    HistogramTotals totals;
  };
  struct Family {
    std::string type;  // counter, gauge, histogram
    std::string help;
    std::string source;                    // the record name that feeds it
    bool protobuf_only = false;            // a native twin: text scrapers have the classic family
    std::map<std::string, Series> series;  // by label set
  };
  Family* family(const std::string& name, const char* type, const std::string& help,
                 std::string* why, bool protobuf_only = false, const std::string& source = {});
  Labels labels_of(const loupe_record& rec) const;
  // True when the record's values count from the session's start (totals), false when
  // they are the increments of a later window.
  bool since_start(const loupe_record& rec) const;
  static Series histogram_series(const HistogramTotals& t, Labels labels, double divisor,
                                 bool native, ClassicGrid grid);
  // `f`'s series `key` fed with `in`: replaced by totals, increased by increments.
  void feed_histogram(Family& f, const std::string& key, const Labels& labels,
                      const HistogramTotals& in, bool totals, double divisor, bool native,
                      ClassicGrid grid);

  std::string prefix_;
  std::uint64_t session_start_ns_ = 0;
  mutable std::mutex mu_;
  std::map<std::string, Family> families_;
  std::map<std::string, double> event_counts_;  // family + label set -> count
};

}  // namespace loupe::sinks

#endif  // LOUPE_SINKS_PROMETHEUS_METRIC_STORE_HPP
