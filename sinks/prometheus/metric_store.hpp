// SPDX-License-Identifier: Apache-2.0
//
// The latest value of every series, as Prometheus text. Records arrive when profilers
// collect (every session interval, and once at the end); a scrape may come at any time,
// so the store keeps, per series, what the last record said and renders it on demand.
//
// Naming (prefix "loupe_" by default; units converted to Prometheus' base units):
//   histogram  <prefix><name>_seconds|_bytes|_<unit>  _bucket{le}, _sum, _count
//   counter    <prefix><name>[_unit]_total
//   gauge      <prefix><name>[_unit]
//   event      <prefix><name>_events_total        (one per event record received)
//   health     <prefix>health_<name>{component}   + <prefix>health_severity{check,component}
// Every series carries the record's labels plus `plugin`.
#ifndef LOUPE_SINKS_PROMETHEUS_METRIC_STORE_HPP
#define LOUPE_SINKS_PROMETHEUS_METRIC_STORE_HPP

#include <cstdint>
#include <map>
#include <mutex>
#include <string>

#include "exposition_text.hpp"
#include "loupe/abi/records.h"

namespace loupe::sinks {

class MetricStore {
 public:
  explicit MetricStore(std::string prefix) : prefix_(std::move(prefix)) {}

  // Thread-safe. Returns false when the record was not stored: a stack sample, or a
  // series whose family already exists with another type (`why` says which).
  bool update(const loupe_record& rec, std::string* why = nullptr);

  // Thread-safe. The whole exposition, families in name order.
  std::string render() const;

  std::size_t families() const;

 private:
  struct Family {
    std::string type;  // counter, gauge, histogram
    std::string help;
    std::map<std::string, std::string> series;  // label set -> rendered lines
  };
  Family* family(const std::string& name, const char* type, const std::string& help,
                 std::string* why);
  Labels labels_of(const loupe_record& rec) const;

  std::string prefix_;
  mutable std::mutex mu_;
  std::map<std::string, Family> families_;
  std::map<std::string, double> event_counts_;  // family + label set -> count
};

}  // namespace loupe::sinks

#endif  // LOUPE_SINKS_PROMETHEUS_METRIC_STORE_HPP
