// SPDX-License-Identifier: Apache-2.0
#include "probe_stats.hpp"

#include <bpf/bpf.h>
#include <linux/bpf.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

namespace loupe {

ProbeStats::~ProbeStats() {
  if (stats_fd_ >= 0) close(stats_fd_);
}

bool ProbeStats::enable(std::string* error) {
  if (stats_fd_ >= 0) return true;
  int fd = bpf_enable_stats(BPF_STATS_RUN_TIME);
  if (fd < 0) {
    if (error) *error = std::string("BPF_ENABLE_STATS refused: ") + std::strerror(errno);
    return false;
  }
  stats_fd_ = fd;
  return true;
}

bool ProbeStats::read(int prog_fd, ProgramStats& out) {
  bpf_prog_info info{};
  __u32 len = sizeof(info);
  if (prog_fd < 0 || bpf_obj_get_info_by_fd(prog_fd, &info, &len) != 0) return false;
  out.run_cnt = info.run_cnt;
  out.run_time_ns = info.run_time_ns;
  out.recursion_misses = info.recursion_misses;
  if (out.program.empty()) out.program = info.name;
  return true;
}

}  // namespace loupe
