// SPDX-License-Identifier: Apache-2.0
//
// What one attached BPF program cost, as counted by the kernel while BPF statistics are
// enabled (`loupe run --stats`, SessionOptions::stats, `loupe bench`).
#ifndef LOUPE_PROGRAM_STATS_HPP
#define LOUPE_PROGRAM_STATS_HPP

#include <cstdint>
#include <string>

namespace loupe {

struct ProgramStats {
  std::string instance;  // plugin instance that attached it
  std::string probe;     // label the plugin gave the attachment
  std::string program;   // BPF program name
  // Where the link points, from the kernel's link info: "tracepoint:NAME" (the kernel gives
  // the event name without its category), "raw_tp:NAME" (raw_tp and tp_btf links),
  // "fentry:FUNC" / "fexit:FUNC", "uprobe:FILE+0xOFF", "uretprobe:...", "perf_event",
  // "kprobe:FUNC"; empty when the kernel does not say (perf-event links before 6.6).
  std::string target;
  std::uint32_t prog_id = 0;  // programs shared by several probes count once per program
  std::uint64_t run_cnt = 0;
  std::uint64_t run_time_ns = 0;
  std::uint64_t recursion_misses = 0;
  double avg_ns() const {
    return run_cnt ? static_cast<double>(run_time_ns) / static_cast<double>(run_cnt) : 0;
  }
};

}  // namespace loupe

#endif  // LOUPE_PROGRAM_STATS_HPP
