// SPDX-License-Identifier: Apache-2.0
//
// Reads the per-device, per-process and health maps at collect() and emits records:
// latency and size histograms per device+op+sync (interval deltas between final reports,
// the whole session in the final one), cumulative counters, bounded per-process totals
// and health.
#ifndef LOUPE_BIOLAT_BIOLAT_REPORTER_HPP
#define LOUPE_BIOLAT_BIOLAT_REPORTER_HPP

#include <cstdint>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "biolat.h"
#include "device_names.hpp"
#include "loupe/sdk/host.hpp"

namespace loupe::biolat {

// Rows live in per-CPU arrays by slot; the hashes name each slot (biolat.h, bio_dev_op).
struct ReporterMaps {
  int dev_ops_fd = -1;     // (dev, op) -> bio_dev_op: its stats rows at 2 * slot + sync
  int stats_fd = -1;       // per-CPU array of bio_stats
  int proc_slots_fd = -1;  // bio_proc_key -> slot in procs; -1: per-process breakdown off
  int procs_fd = -1;       // per-CPU array of bio_proc
  int counters_fd = -1;
  int starts_fd = -1;
};

class BiolatReporter {
 public:
  BiolatReporter(const sdk::Host& host, ReporterMaps maps, std::string mechanism);

  void collect(bool is_final, std::uint64_t window_start_ns, std::uint64_t window_end_ns);

 private:
  using Labels = std::vector<std::pair<std::string, std::string>>;

  void emit_device(const bio_stats_key& key, const bio_stats& total);
  struct DeviceTime {
    std::uint64_t queue_ns = 0, total_ns = 0, requests = 0, queued = 0;
  };
  void emit_queue_finding(std::uint32_t dev, const DeviceTime& d);
  void emit_procs();
  void emit_health(const bio_counters& c, std::uint64_t in_flight);
  void hist(const char* name, const char* unit, const bio_hist& h, const Labels& labels);
  // Counts and ratios since the session began; `now`: a state as of the window's end.
  void metric(const char* name, loupe_metric_type type, const char* unit, double v,
              const Labels& labels, bool now = false);
  bio_counters read_counters() const;
  std::uint64_t count_in_flight();
  void emit_in_flight(const bio_start& s, std::uint64_t stop);

  sdk::Host host_;
  ReporterMaps maps_;
  std::string mechanism_;
  DeviceNames devices_;
  int ncpus_;
  bool is_final_ = false;
  std::uint64_t window_start_ = 0, window_end_ = 0;
  std::uint64_t session_start_ = 0;
  std::map<std::uint64_t, bio_stats> previous_;  // by packed stats key, for deltas
};

}  // namespace loupe::biolat

#endif  // LOUPE_BIOLAT_BIOLAT_REPORTER_HPP
