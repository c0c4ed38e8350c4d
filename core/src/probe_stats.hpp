// SPDX-License-Identifier: Apache-2.0
//
// Per-probe run-time statistics (`loupe run --stats`): the kernel counts runs and time of
// every BPF program only while a BPF_ENABLE_STATS fd is held, so the cost is paid for
// this session only and stops when the fd closes, even after a crash.
#ifndef LOUPE_PROBE_STATS_HPP
#define LOUPE_PROBE_STATS_HPP

#include <cstdint>
#include <string>
#include <vector>

namespace loupe {

struct ProgramStats {
  std::string instance;
  std::string probe;
  std::string program;
  std::uint64_t run_cnt = 0;
  std::uint64_t run_time_ns = 0;
  std::uint64_t recursion_misses = 0;
  double avg_ns() const { return run_cnt ? static_cast<double>(run_time_ns) / static_cast<double>(run_cnt) : 0; }
};

class ProbeStats {
 public:
  ProbeStats() = default;
  ~ProbeStats();
  ProbeStats(const ProbeStats&) = delete;
  ProbeStats& operator=(const ProbeStats&) = delete;

  // Starts counting; false with `error` when the kernel refuses (e.g. EPERM, EINVAL).
  bool enable(std::string* error);
  bool enabled() const { return stats_fd_ >= 0; }
  // Reads run_cnt/run_time_ns/recursion_misses of `prog_fd` (any BPF program fd).
  static bool read(int prog_fd, ProgramStats& out);

 private:
  int stats_fd_ = -1;
};

}  // namespace loupe

#endif  // LOUPE_PROBE_STATS_HPP
