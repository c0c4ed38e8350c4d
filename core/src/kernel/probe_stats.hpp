// SPDX-License-Identifier: Apache-2.0
//
// Per-probe run-time statistics (`loupe run --stats`): the kernel counts runs and time of
// every BPF program only while a BPF_ENABLE_STATS fd is held, so the cost is paid for
// this session only and stops when the fd closes, even after a crash.
#ifndef LOUPE_KERNEL_PROBE_STATS_HPP
#define LOUPE_KERNEL_PROBE_STATS_HPP

#include <cstdint>
#include <string>
#include <vector>

#include "loupe/program_stats.hpp"
#include "util/result.hpp"

namespace loupe {

class ProbeStats {
 public:
  ProbeStats() = default;
  ~ProbeStats();
  ProbeStats(const ProbeStats&) = delete;
  ProbeStats& operator=(const ProbeStats&) = delete;

  // Starts counting; an error when the kernel refuses (e.g. EPERM, EINVAL).
  Status enable();
  bool enabled() const { return stats_fd_ >= 0; }
  // Reads run_cnt/run_time_ns/recursion_misses of `prog_fd` (any BPF program fd).
  static bool read(int prog_fd, ProgramStats& out);
  // What a BPF link is attached to (ProgramStats::target); empty when the kernel does not say.
  static std::string link_target(int link_fd);

 private:
  int stats_fd_ = -1;
};

}  // namespace loupe

#endif  // LOUPE_KERNEL_PROBE_STATS_HPP
