// SPDX-License-Identifier: Apache-2.0
//
// Opens one software cpu-clock sampling event per online CPU and attaches a perf_event
// BPF program to each, handing every link to the host (which detaches it before stop()).
// Shared by cpusample and jitregions, which both sample on-CPU instruction pointers.
#ifndef LOUPE_CPUSAMPLE_PERF_EVENT_SAMPLER_HPP
#define LOUPE_CPUSAMPLE_PERF_EVENT_SAMPLER_HPP

#include <cstdint>
#include <string>
#include <vector>

#include "loupe/sdk/host.hpp"

struct bpf_program;

namespace loupe::cpusample {

// Either a frequency the kernel adapts the period to, or a fixed period in ns of CPU time.
struct SamplingSpec {
  std::uint64_t frequency_hz = 99;
  std::uint64_t period_ns = 0;  // > 0 selects period mode
  std::string describe() const;
};

// "0-3,5,7-8" (the format of /sys/devices/system/cpu/online) -> {0,1,2,3,5,7,8}.
// Throws std::invalid_argument on malformed text.
std::vector<int> parse_cpu_list(const std::string& text);
std::vector<int> online_cpus();

class PerfEventSampler {
 public:
  PerfEventSampler(const sdk::Host& host, SamplingSpec spec) : host_(host), spec_(spec) {}

  // Attaches `prog` on every online CPU; CPUs that refuse are recorded with the host and
  // skipped. Returns the number of CPUs sampled; throws sdk::Error when none could be.
  int attach(bpf_program* prog, const std::string& probe_prefix);

 private:
  const sdk::Host& host_;
  SamplingSpec spec_;
};

}  // namespace loupe::cpusample

#endif  // LOUPE_CPUSAMPLE_PERF_EVENT_SAMPLER_HPP
