// SPDX-License-Identifier: Apache-2.0
//
// An empty BPF program (r0 = 0; exit) attached to tracepoints and uprobes: the baseline
// `loupe bench` subtracts, so the cost a plugin adds is told apart from the cost of the
// attach mechanism itself (trap, context setup, program dispatch). Built from raw
// instructions, so the core needs no compiled object for it.
#ifndef LOUPE_CLI_PROBE_BENCH_SRC_EMPTY_PROBE_HPP
#define LOUPE_CLI_PROBE_BENCH_SRC_EMPTY_PROBE_HPP

#include <string>
#include <vector>

#include "loupe/program_stats.hpp"

namespace loupe {

class EmptyProbe {
 public:
  EmptyProbe() = default;
  ~EmptyProbe();
  EmptyProbe(const EmptyProbe&) = delete;
  EmptyProbe& operator=(const EmptyProbe&) = delete;

  // Attaches an empty program to `hook`: "category:name" (a tracepoint), "raw_tp:NAME"
  // (the dispatch tp_btf programs use too) or "uprobe:FILE+0xOFF" / "uretprobe:FILE+0xOFF"
  // (system-wide); "" on success.
  std::string attach(const std::string& hook);
  void detach();
  // Runs and time of the programs since they were loaded, summed over both program types
  // (counts only while stats are enabled).
  ProgramStats stats() const;

 private:
  std::string attach_tracepoint(const std::string& category, const std::string& name);
  std::string attach_raw_tracepoint(const std::string& name);
  std::string attach_uprobe(const std::string& path, unsigned long long offset, bool retprobe);
  std::string attach_perf_event(void* attr, int prog_fd, const std::string& what);

  int tracepoint_prog_fd_ = -1;
  int kprobe_prog_fd_ = -1;  // uprobes run BPF_PROG_TYPE_KPROBE programs
  int raw_tp_prog_fd_ = -1;
  std::vector<int> perf_fds_;  // perf events and raw tracepoint attachments: closing detaches
};

}  // namespace loupe

#endif  // LOUPE_CLI_PROBE_BENCH_SRC_EMPTY_PROBE_HPP
