// SPDX-License-Identifier: Apache-2.0
//
// Calibrated workloads for `loupe bench`: tight loops of one syscall, made through
// syscall(2) so no libc cache hides a call. Each iteration enters and leaves the kernel
// once, firing that syscall's sys_enter/sys_exit tracepoints (and raw_syscalls') once.
#ifndef LOUPE_BENCH_WORKLOAD_HPP
#define LOUPE_BENCH_WORKLOAD_HPP

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace loupe {

class SyscallWorkload {
 public:
  // The built-in loop for `syscall` (getppid, getpid, gettid, getuid, read, write, getcwd,
  // sched_yield, futex, close), or nullopt.
  static std::optional<SyscallWorkload> find(const std::string& syscall);
  static std::vector<std::string> names();

  const std::string& name() const { return name_; }
  // Runs `iterations` calls; returns the elapsed ns (CLOCK_MONOTONIC).
  std::uint64_t run(std::uint64_t iterations) const;
  // Iterations that take about `target_ns` on this machine now.
  std::uint64_t calibrate(std::uint64_t target_ns) const;

 private:
  explicit SyscallWorkload(std::string name) : name_(std::move(name)) {}
  std::string name_;
};

}  // namespace loupe

#endif  // LOUPE_BENCH_WORKLOAD_HPP
