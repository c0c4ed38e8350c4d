// SPDX-License-Identifier: Apache-2.0
//
// collect(): reads the per-CPU histogram and counter maps, sweeps stale in-flight
// entries, and emits HISTOGRAM, METRIC and HEALTH records per target (and per pid/comm
// when the breakdown is on). Interval reports carry the interval's delta; the final
// report covers the whole session.
#ifndef LOUPE_LATENCY_LATENCY_REPORTER_HPP
#define LOUPE_LATENCY_LATENCY_REPORTER_HPP

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "latency.h"
#include "loupe/hist.h"
#include "loupe/sdk/host.hpp"
#include "outlier_decoder.hpp"

namespace loupe::latency {

struct ReporterMaps {
  int starts_fd = -1;
  int hists_fd = -1;
  int counters_fd = -1;
  int breakdown_fd = -1;  // -1 when the breakdown is off
  // USDT argument labels: -1 when no target has one.
  int start_labels_fd = -1;
  int label_hists_fd = -1;
  int label_counts_fd = -1;
  int site_counts_fd = -1;  // -1 when no target is a USDT probe
  int execs_fd = -1;        // -1 when no target is a user probe (uprobe, USDT)
  int execs_lost_fd = -1;
};

// What a user-probe target sits on, fixed when it was resolved (empty for the others).
struct TargetProbeFile {
  std::string binary;                          // the probed file ("" = not a user probe)
  std::uint64_t ino = 0;                       // its inode: is it what the target exec'd?
  bool program = false;                        // an executable, not a library
  std::map<std::uint64_t, std::string> sites;  // USDT: file offset -> "function+0xOFF"
  std::string uprobe_site;                     // uprobe: "function+0xOFF"
};

struct ReporterOptions {
  bool linear = false;
  bool per_pid = false;
  bool per_comm = false;
  std::uint64_t max_age_ns = 0;
  std::uint64_t breakdown_limit = 0;  // for the messages that say which key raises it
  // A process given by --pid: what it was running when the session began (inode, path),
  // since its exec came before the plugin could see it.
  std::vector<std::pair<std::uint64_t, std::string>> running;
};

class LatencyReporter {
 public:
  LatencyReporter(const sdk::Host& host, ReporterMaps maps, ReporterOptions opts,
                  std::vector<TargetLabels> targets, std::vector<TargetProbeFile> files = {});

  void collect(bool is_final, std::uint64_t window_start_ns, std::uint64_t window_end_ns);

 private:
  struct Swept {
    std::vector<std::uint64_t> expired;    // per target, stale entries removed by the sweep
    std::vector<std::uint64_t> in_flight;  // per target, entries younger than max_age
  };
  Swept sweep_starts(bool is_final);
  lat_counters read_counters(std::uint32_t target) const;
  loupe_hist read_hist(int fd, const void* key) const;
  void emit_hist(const std::string& key, const loupe_hist& total,
                 const std::vector<std::pair<std::string, std::string>>& labels);
  void emit_target(std::uint32_t i, const lat_counters& c, const Swept& swept);
  void emit_breakdown();
  void emit_labels();
  void emit_sites();
  void emit_silent(std::uint32_t i);
  void emit_health(std::uint32_t i, const char* name, std::uint64_t v, const std::string& why);
  void emit_label_health(std::uint32_t i, const lat_counters& c);
  void emit_site_health(std::uint32_t i, const lat_counters& c);
  void emit_execs_lost();

  sdk::Host host_;
  ReporterMaps maps_;
  ReporterOptions opts_;
  std::vector<TargetLabels> targets_;
  std::vector<TargetProbeFile> files_;          // per target
  std::vector<std::uint64_t> expired_swept_;    // session totals
  std::map<std::string, loupe_hist> previous_;  // last interval's totals, by record key
  std::map<std::string, std::uint64_t> previous_counts_;
  bool is_final_ = false;
  std::uint64_t window_start_ = 0, window_end_ = 0;
  std::uint64_t session_start_ = 0;
};

}  // namespace loupe::latency

#endif  // LOUPE_LATENCY_LATENCY_REPORTER_HPP
