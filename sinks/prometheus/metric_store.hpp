// SPDX-License-Identifier: Apache-2.0
//
// The latest value of every series, as Prometheus text or protobuf. Records arrive when
// profilers collect (every session interval, and once at the end); a scrape may come at any
// time, so the store keeps, per series, what the last record said and renders it on demand.
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

class MetricStore {
 public:
  explicit MetricStore(std::string prefix) : prefix_(std::move(prefix)) {}

  // Thread-safe. Returns false when the record was not stored: a stack sample, or a
  // series whose family already exists with another type (`why` says which).
  bool update(const loupe_record& rec, std::string* why = nullptr);

  // Thread-safe. The whole exposition, families in name order: the text format (0.0.4),
  // or length-delimited io.prometheus.client.MetricFamily messages.
  std::string render() const;
  std::string render_protobuf() const;

  std::size_t families() const;

 private:
  struct Series {
    Labels labels;
    double value = 0;  // counter, gauge
    // histogram: classic buckets (inclusive upper bound in the base unit, cumulative count)
    // without +Inf, then count and sum; `native` when it fits schema 0.
    std::vector<std::pair<double, std::uint64_t>> classic;
    std::uint64_t count = 0;
    double sum = 0;
    std::optional<NativeHistogram> native;
  };
  struct Family {
    std::string type;  // counter, gauge, histogram
    std::string help;
    bool protobuf_only = false;            // a native twin: text scrapers have the classic family
    std::map<std::string, Series> series;  // by label set
  };
  Family* family(const std::string& name, const char* type, const std::string& help,
                 std::string* why, bool protobuf_only = false);
  Labels labels_of(const loupe_record& rec) const;
  static Series histogram_series(const loupe_histogram& h, Labels labels, double divisor);

  std::string prefix_;
  mutable std::mutex mu_;
  std::map<std::string, Family> families_;
  std::map<std::string, double> event_counts_;  // family + label set -> count
};

}  // namespace loupe::sinks

#endif  // LOUPE_SINKS_PROMETHEUS_METRIC_STORE_HPP
