// SPDX-License-Identifier: Apache-2.0
//
// `loupe bench PROFILE`: what each profiler of a profile costs per event, on this machine.
// For every profiler, one session with BPF statistics finds what its probes attach to;
// every syscall tracepoint among them gets a built-in loop of that syscall, block
// tracepoints a loop of O_DIRECT reads, and every uprobe/uretprobe on a libc allocation or
// pthread lock function a loop that calls it. Each repetition
// runs the loop three ways, in rotating order: without loupe, with an empty BPF program on
// the same tracepoints, and under a session of that profiler alone. Reported per loop
// iteration, min/median/max over the repetitions:
//   - the kernel's own accounting (run_time_ns / run_cnt of the programs on those tracepoints),
//   - the slowdown against no probe and against the empty program.
// Probes no built-in loop fires (uprobes on other functions, other tracepoints, perf
// sampling) are listed as skipped with the reason. See docs/performance.md "loupe bench" for the
// limits.
#ifndef LOUPE_CLI_PROBE_BENCH_INCLUDE_LOUPE_PROBE_BENCH_HPP
#define LOUPE_CLI_PROBE_BENCH_INCLUDE_LOUPE_PROBE_BENCH_HPP

#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include "loupe/program_stats.hpp"

namespace loupe {

struct BenchOptions {
  std::string profile_path;
  unsigned reps = 5;
  double loop_seconds = 0.2;  // length of one timed loop without probes
  std::vector<std::filesystem::path> extra_plugin_dirs;
};

struct Spread {
  double min = 0, median = 0, max = 0;
};

struct BenchWorkload {
  std::string loop;                // "getppid", "malloc+free", ...
  std::string kind;                // "syscall", "block I/O" or "user call"
  std::vector<std::string> hooks;  // category:name or uprobe:FILE+0xOFF of the probes it fires
  std::uint64_t iterations = 0;
  Spread none_ns, empty_ns, loupe_ns;  // ns per iteration
  Spread added_vs_none_ns, added_vs_empty_ns;
  Spread bpf_ns;              // Σ over the profiler's programs on those tracepoints
  Spread empty_bpf_ns;        // Σ over the empty programs
  Spread runs_per_iteration;  // profiler program runs / iterations (≥ 1 with noise)
};

struct BenchSkip {
  std::string probe, target, reason;
};

struct BenchProfiler {
  std::string instance;
  std::vector<ProgramStats> probes;  // from the discovery session
  std::vector<BenchWorkload> workloads;
  std::vector<BenchSkip> skipped;
  std::string error;  // the profiler could not run alone
};

struct BenchReport {
  std::string profile;
  unsigned reps = 0;
  unsigned cpus = 0;
  std::string kernel;
  std::vector<BenchProfiler> profilers;
  std::string json() const;
  std::string text() const;
};

// Throws std::runtime_error on a profile that cannot be read or lacks privileges.
BenchReport run_probe_bench(const BenchOptions& opts);

}  // namespace loupe

#endif  // LOUPE_CLI_PROBE_BENCH_INCLUDE_LOUPE_PROBE_BENCH_HPP
