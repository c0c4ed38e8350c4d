// SPDX-License-Identifier: Apache-2.0
#include "empty_probe.hpp"

#include <bpf/bpf.h>
#include <fmt/format.h>
#include <linux/perf_event.h>
#include <sys/ioctl.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <fstream>

#include "kernel/probe_stats.hpp"
#include "loupe/features.hpp"

namespace loupe {
namespace {

int load_empty(bpf_prog_type type, std::string* error) {
  const bpf_insn insns[] = {
      {BPF_ALU64 | BPF_MOV | BPF_K, BPF_REG_0, 0, 0, 0},  // r0 = 0
      {BPF_JMP | BPF_EXIT, 0, 0, 0, 0},
  };
  int fd = bpf_prog_load(type, "loupe_empty", "GPL", insns, 2, nullptr);
  if (fd < 0) *error = fmt::format("loading the empty program: {}", std::strerror(errno));
  return fd;
}

// A dynamic PMU's type id or one bit of its config, from sysfs ("config:0" → 0).
bool read_pmu(const std::string& file, int* out, bool bit) {
  std::ifstream in(file);
  std::string text;
  if (!std::getline(in, text)) return false;
  if (bit) {
    auto colon = text.find(':');
    if (colon == std::string::npos) return false;
    text = text.substr(colon + 1);
  }
  try {
    *out = std::stoi(text);
  } catch (const std::exception&) {
    return false;
  }
  return true;
}

}  // namespace

std::string EmptyProbe::attach(const std::string& hook) {
  for (const char* kind : {"uprobe:", "uretprobe:"}) {
    if (hook.rfind(kind, 0) != 0) continue;
    std::string rest = hook.substr(std::strlen(kind));
    auto plus = rest.rfind('+');
    if (plus == std::string::npos) return fmt::format("'{}': expected FILE+0xOFFSET", hook);
    unsigned long long offset = std::strtoull(rest.c_str() + plus + 1, nullptr, 0);
    return attach_uprobe(rest.substr(0, plus), offset, kind[1] == 'r');
  }
  if (hook.rfind("raw_tp:", 0) == 0) return attach_raw_tracepoint(hook.substr(7));
  auto colon = hook.find(':');
  if (colon == std::string::npos) return fmt::format("'{}': expected category:name", hook);
  return attach_tracepoint(hook.substr(0, colon), hook.substr(colon + 1));
}

std::string EmptyProbe::attach_tracepoint(const std::string& category, const std::string& name) {
  std::string err;
  if (tracepoint_prog_fd_ < 0 &&
      (tracepoint_prog_fd_ = load_empty(BPF_PROG_TYPE_TRACEPOINT, &err)) < 0)
    return err;
  const MountOutcome mounted = mount_tracefs();
  if (mounted.path.empty()) return mounted.error;
  const std::string& tracefs = mounted.path;
  std::ifstream in(tracefs + "/events/" + category + "/" + name + "/id");
  unsigned long long id = 0;
  if (!(in >> id))
    return fmt::format("tracepoint {}:{} not found in {}/events", category, name, tracefs);
  perf_event_attr attr{};
  attr.size = sizeof(attr);
  attr.type = PERF_TYPE_TRACEPOINT;
  attr.config = id;
  attr.sample_period = 1;
  attr.wakeup_events = 1;
  return attach_perf_event(&attr, tracepoint_prog_fd_, category + ":" + name);
}

std::string EmptyProbe::attach_raw_tracepoint(const std::string& name) {
  std::string err;
  if (raw_tp_prog_fd_ < 0 && (raw_tp_prog_fd_ = load_empty(BPF_PROG_TYPE_RAW_TRACEPOINT, &err)) < 0)
    return err;
  int fd = bpf_raw_tracepoint_open(name.c_str(), raw_tp_prog_fd_);
  if (fd < 0)
    return fmt::format("attaching the empty program to raw tracepoint {}: {}", name,
                       std::strerror(errno));
  perf_fds_.push_back(fd);  // closing the raw tracepoint fd detaches, as for perf events
  return {};
}

std::string EmptyProbe::attach_uprobe(const std::string& path, unsigned long long offset,
                                      bool retprobe) {
  std::string err;
  if (kprobe_prog_fd_ < 0 && (kprobe_prog_fd_ = load_empty(BPF_PROG_TYPE_KPROBE, &err)) < 0)
    return err;
  const std::string pmu = "/sys/bus/event_source/devices/uprobe";
  int type = -1, ret_bit = -1;
  if (!read_pmu(pmu + "/type", &type, false))
    return "the uprobe PMU is absent (" + pmu + "/type): this kernel has no CONFIG_UPROBE_EVENTS";
  if (retprobe && !read_pmu(pmu + "/format/retprobe", &ret_bit, true))
    return "the uprobe PMU has no retprobe format bit (" + pmu + "/format/retprobe)";
  perf_event_attr attr{};
  attr.size = sizeof(attr);
  attr.type = static_cast<__u32>(type);
  attr.config = retprobe ? (1ull << ret_bit) : 0;
  attr.config1 = reinterpret_cast<__u64>(path.c_str());  // uprobe_path
  attr.config2 = offset;                                 // probe_offset
  attr.sample_period = 1;
  attr.wakeup_events = 1;
  return attach_perf_event(
      &attr, kprobe_prog_fd_,
      fmt::format("{}:{}+{:#x}", retprobe ? "uretprobe" : "uprobe", path, offset));
}

std::string EmptyProbe::attach_perf_event(void* attr, int prog_fd, const std::string& what) {
  // pid -1, cpu 0: a BPF program on a tracepoint or uprobe event runs on every CPU (as libbpf
  // does).
  int pfd = static_cast<int>(syscall(SYS_perf_event_open, attr, -1, 0, -1, PERF_FLAG_FD_CLOEXEC));
  if (pfd < 0) return fmt::format("perf_event_open({}): {}", what, std::strerror(errno));
  if (ioctl(pfd, PERF_EVENT_IOC_SET_BPF, prog_fd) != 0 ||
      ioctl(pfd, PERF_EVENT_IOC_ENABLE, 0) != 0) {
    int e = errno;
    close(pfd);
    return fmt::format("attaching the empty program to {}: {}", what, std::strerror(e));
  }
  perf_fds_.push_back(pfd);
  return {};
}

EmptyProbe::~EmptyProbe() {
  detach();
  for (int fd : {tracepoint_prog_fd_, kprobe_prog_fd_, raw_tp_prog_fd_})
    if (fd >= 0) close(fd);
}

void EmptyProbe::detach() {
  for (int fd : perf_fds_) close(fd);
  perf_fds_.clear();
}

ProgramStats EmptyProbe::stats() const {
  ProgramStats total{"bench", "empty", "loupe_empty", ""};
  for (int fd : {tracepoint_prog_fd_, kprobe_prog_fd_, raw_tp_prog_fd_}) {
    if (fd < 0) continue;
    ProgramStats s{"bench", "empty", "loupe_empty", ""};
    ProbeStats::read(fd, s);
    total.run_cnt += s.run_cnt;
    total.run_time_ns += s.run_time_ns;
  }
  return total;
}

}  // namespace loupe
