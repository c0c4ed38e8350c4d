// SPDX-License-Identifier: Apache-2.0
//
// What latency_workload measured of itself (LATENCY_WORKLOAD_SELF): the tests bound the
// profiler's figures by it instead of by this machine's speed, so they hold on a slow or
// emulated kernel as on a fast one.
#ifndef LOUPE_LATENCY_TESTS_WORKLOAD_SELF_HPP
#define LOUPE_LATENCY_TESTS_WORKLOAD_SELF_HPP

#include <stdlib.h>
#include <unistd.h>

#include <cstdint>
#include <fstream>
#include <string>

namespace loupe::test {

// Sets LATENCY_WORKLOAD_SELF for the workloads this process starts from now on, and reads
// the file back; unsets and removes it on destruction.
class WorkloadSelf {
 public:
  WorkloadSelf() : path_("/tmp/loupe-latency-self-" + std::to_string(::getpid())) {
    ::setenv("LATENCY_WORKLOAD_SELF", path_.c_str(), 1);
  }
  ~WorkloadSelf() {
    ::unsetenv("LATENCY_WORKLOAD_SELF");
    ::unlink(path_.c_str());
  }
  WorkloadSelf(const WorkloadSelf&) = delete;
  WorkloadSelf& operator=(const WorkloadSelf&) = delete;

  // The median of lat_spin_2us() as its caller timed it (traps included); 0 if not written.
  std::uint64_t spin_median_ns() const { return median_ns("spin2us"); }
  // The same for "sleep3ms", "spin2us" or "nanosleep" (the workload's target names).
  std::uint64_t median_ns(const std::string& target) const {
    std::ifstream in(path_);
    std::string line;
    const std::string key = target + "_median_ns=";
    while (std::getline(in, line))
      if (line.rfind(key, 0) == 0) return std::stoull(line.substr(key.size()));
    return 0;
  }

 private:
  std::string path_;
};

}  // namespace loupe::test

#endif  // LOUPE_LATENCY_TESTS_WORKLOAD_SELF_HPP
