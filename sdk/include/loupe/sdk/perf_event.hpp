// SPDX-License-Identifier: Apache-2.0
//
// On-CPU sampling: one software cpu-clock perf event per online CPU with a perf_event BPF
// program attached to each, every link handed to the host (which detaches it before
// stop()). The user-space half of a SEC("perf_event") program.
//
//   sdk::PerfEventSampler sampler(host, {.frequency_hz = 99});
//   int cpus = sampler.attach(skel->progs.on_sample, "cpu-clock");
#ifndef LOUPE_SDK_PERF_EVENT_HPP
#define LOUPE_SDK_PERF_EVENT_HPP

#include <bpf/libbpf.h>
#include <linux/perf_event.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <cstring>
#include <fstream>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

#include "loupe/abi/config.h"
#include "loupe/sdk/host.hpp"
#include "loupe/sdk/plugin.hpp"

namespace loupe::sdk {

// Either a frequency the kernel adapts the period to, or a fixed period in ns of CPU time.
struct SamplingSpec {
  std::uint64_t frequency_hz = 99;
  std::uint64_t period_ns = 0;  // > 0 selects period mode
  std::string describe() const;
};

// The two keys that choose the sampling rate, and reading them (with the lower bound on
// period_ns the schema cannot say: below 10 us the interrupt would dominate the CPU).
inline constexpr loupe_config_key kFrequencyKey = {
    "frequency",
    LOUPE_CFG_INT,
    0,
    "99",
    "samples per second per CPU (99 avoids lockstep with 100 Hz timers)",
    1,
    100000};
inline constexpr loupe_config_key kPeriodKey = {
    "period_ns",
    LOUPE_CFG_INT,
    0,
    "0",
    "sample every N ns of CPU time instead of at a frequency (0 = use frequency)",
    0,
    INT64_MAX};
inline constexpr loupe_config_key kSamplingKeys[] = {kFrequencyKey, kPeriodKey};

inline SamplingSpec read_sampling_spec(const Config& cfg) {
  SamplingSpec spec;
  spec.frequency_hz = static_cast<std::uint64_t>(cfg.get_int("frequency", 99));
  spec.period_ns = static_cast<std::uint64_t>(cfg.get_int("period_ns", 0));
  if (spec.period_ns && spec.period_ns < 10000)
    throw Error(LOUPE_ERR_INVALID_ARG, "period_ns = " + std::to_string(spec.period_ns) +
                                           ": below 10000 ns the sampling interrupt would "
                                           "dominate the CPU");
  return spec;
}

// "0-3,5,7-8" (the format of /sys/devices/system/cpu/online) -> {0,1,2,3,5,7,8}.
// Throws std::invalid_argument on malformed text.
std::vector<int> parse_cpu_list(const std::string& text);
std::vector<int> online_cpus();

class PerfEventSampler {
 public:
  PerfEventSampler(const Host& host, SamplingSpec spec) : host_(host), spec_(spec) {}

  // Attaches `prog` on every online CPU; CPUs that refuse are recorded with the host and
  // skipped. Returns the number of CPUs sampled; throws sdk::Error when none could be.
  int attach(bpf_program* prog, const std::string& probe_prefix);

 private:
  const Host& host_;
  SamplingSpec spec_;
};

inline std::string SamplingSpec::describe() const {
  if (period_ns) return "every " + std::to_string(period_ns) + " ns of CPU time";
  return std::to_string(frequency_hz) + " Hz";
}

inline std::vector<int> parse_cpu_list(const std::string& text) {
  std::vector<int> cpus;
  std::stringstream ss(text);
  std::string part;
  auto number = [&](const std::string& s) {
    if (s.empty() || s.find_first_not_of("0123456789") != std::string::npos)
      throw std::invalid_argument("malformed CPU list '" + text + "'");
    return std::stoi(s);
  };
  while (std::getline(ss, part, ',')) {
    while (!part.empty() && (part.back() == '\n' || part.back() == ' ')) part.pop_back();
    if (part.empty()) continue;
    auto dash = part.find('-');
    int lo = number(part.substr(0, dash));
    int hi = dash == std::string::npos ? lo : number(part.substr(dash + 1));
    if (hi < lo) throw std::invalid_argument("malformed CPU list '" + text + "'");
    for (int c = lo; c <= hi; ++c) cpus.push_back(c);
  }
  if (cpus.empty()) throw std::invalid_argument("empty CPU list '" + text + "'");
  return cpus;
}

inline std::vector<int> online_cpus() {
  std::ifstream in("/sys/devices/system/cpu/online");
  std::string text;
  if (!std::getline(in, text))
    throw Error(LOUPE_ERR_NOT_FOUND, "cannot read /sys/devices/system/cpu/online");
  try {
    return parse_cpu_list(text);
  } catch (const std::invalid_argument& e) {
    throw Error(LOUPE_ERR_INTERNAL, e.what());
  }
}

inline int PerfEventSampler::attach(bpf_program* prog, const std::string& probe_prefix) {
  perf_event_attr attr{};
  attr.size = sizeof(attr);
  attr.type = PERF_TYPE_SOFTWARE;
  attr.config = PERF_COUNT_SW_CPU_CLOCK;
  if (spec_.period_ns) {
    attr.sample_period = spec_.period_ns;
  } else {
    attr.freq = 1;
    attr.sample_freq = spec_.frequency_hz;
  }
  int attached = 0;
  std::string first_error;
  for (int cpu : online_cpus()) {
    const std::string probe = probe_prefix + ":cpu" + std::to_string(cpu);
    int fd =
        static_cast<int>(::syscall(__NR_perf_event_open, &attr, -1, cpu, -1, PERF_FLAG_FD_CLOEXEC));
    if (fd < 0) {
      int err = errno;
      // A CPU that went offline between the read and the open is not an error.
      if (err == ENODEV) continue;
      host_.adopt_link(nullptr, prog, probe, err);
      if (first_error.empty())
        first_error = "perf_event_open(cpu-clock, cpu " + std::to_string(cpu) +
                      "): " + std::strerror(err) +
                      (err == EACCES || err == EPERM ? " (needs CAP_PERFMON or a lower "
                                                       "kernel.perf_event_paranoid)"
                                                     : "");
      continue;
    }
    bpf_link* link = bpf_program__attach_perf_event(prog, fd);
    int err = link ? 0 : errno;
    host_.adopt_link(link, prog, probe, err);
    if (!link) {
      ::close(fd);  // the link owns the fd only once it exists
      if (first_error.empty())
        first_error = "attaching to the cpu-clock event of cpu " + std::to_string(cpu) + ": " +
                      std::strerror(err);
      continue;
    }
    ++attached;
  }
  if (attached == 0) throw Error(LOUPE_ERR_KERNEL, "no CPU could be sampled: " + first_error);
  return attached;
}

}  // namespace loupe::sdk

#endif  // LOUPE_SDK_PERF_EVENT_HPP
