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

#include "loupe/features.hpp"
#include "probe_stats.hpp"

namespace loupe {

std::string EmptyTracepointProbe::attach(const std::string& category, const std::string& name) {
  if (prog_fd_ < 0) {
    const bpf_insn insns[] = {
        {BPF_ALU64 | BPF_MOV | BPF_K, BPF_REG_0, 0, 0, 0},  // r0 = 0
        {BPF_JMP | BPF_EXIT, 0, 0, 0, 0},
    };
    prog_fd_ = bpf_prog_load(BPF_PROG_TYPE_TRACEPOINT, "loupe_empty", "GPL", insns, 2, nullptr);
    if (prog_fd_ < 0) return fmt::format("loading the empty tracepoint program: {}", std::strerror(errno));
  }
  std::string err;
  std::string tracefs = ensure_tracefs(&err);
  if (tracefs.empty()) return err;
  std::ifstream in(tracefs + "/events/" + category + "/" + name + "/id");
  unsigned long long id = 0;
  if (!(in >> id)) return fmt::format("tracepoint {}:{} not found in {}/events", category, name, tracefs);
  perf_event_attr attr{};
  attr.size = sizeof(attr);
  attr.type = PERF_TYPE_TRACEPOINT;
  attr.config = id;
  attr.sample_period = 1;
  attr.wakeup_events = 1;
  // cpu 0, any pid: a BPF program on a tracepoint event runs for every CPU (as libbpf does).
  int pfd = static_cast<int>(syscall(SYS_perf_event_open, &attr, -1, 0, -1, PERF_FLAG_FD_CLOEXEC));
  if (pfd < 0) return fmt::format("perf_event_open({}:{}): {}", category, name, std::strerror(errno));
  if (ioctl(pfd, PERF_EVENT_IOC_SET_BPF, prog_fd_) != 0 || ioctl(pfd, PERF_EVENT_IOC_ENABLE, 0) != 0) {
    int e = errno;
    close(pfd);
    return fmt::format("attaching the empty program to {}:{}: {}", category, name, std::strerror(e));
  }
  perf_fds_.push_back(pfd);
  return {};
}

EmptyTracepointProbe::~EmptyTracepointProbe() {
  detach();
  if (prog_fd_ >= 0) close(prog_fd_);
}

void EmptyTracepointProbe::detach() {
  for (int fd : perf_fds_) close(fd);
  perf_fds_.clear();
}

ProgramStats EmptyTracepointProbe::stats() const {
  ProgramStats s{"bench", "empty", "loupe_empty", ""};
  ProbeStats::read(prog_fd_, s);
  return s;
}

}  // namespace loupe
