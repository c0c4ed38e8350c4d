// SPDX-License-Identifier: Apache-2.0
#include "perf_event_sampler.hpp"

#include <bpf/libbpf.h>
#include <linux/perf_event.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <sstream>
#include <stdexcept>

#include "loupe/sdk/plugin.hpp"

namespace loupe::cpusample {

std::string SamplingSpec::describe() const {
  if (period_ns) return "every " + std::to_string(period_ns) + " ns of CPU time";
  return std::to_string(frequency_hz) + " Hz";
}

std::vector<int> parse_cpu_list(const std::string& text) {
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

std::vector<int> online_cpus() {
  std::ifstream in("/sys/devices/system/cpu/online");
  std::string text;
  if (!std::getline(in, text))
    throw sdk::Error(LOUPE_ERR_NOT_FOUND, "cannot read /sys/devices/system/cpu/online");
  try {
    return parse_cpu_list(text);
  } catch (const std::invalid_argument& e) {
    throw sdk::Error(LOUPE_ERR_INTERNAL, e.what());
  }
}

int PerfEventSampler::attach(bpf_program* prog, const std::string& probe_prefix) {
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
    int fd = static_cast<int>(
        ::syscall(__NR_perf_event_open, &attr, -1, cpu, -1, PERF_FLAG_FD_CLOEXEC));
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
  if (attached == 0)
    throw sdk::Error(LOUPE_ERR_KERNEL, "no CPU could be sampled: " + first_error);
  return attached;
}

}  // namespace loupe::cpusample
