// SPDX-License-Identifier: Apache-2.0
#include "probe_stats.hpp"

#include <bpf/bpf.h>
#include <linux/bpf.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <fmt/format.h>

namespace loupe {
namespace {

// The perf_event arm of struct bpf_link_info (kernel 6.6+); Debian 12's uapi headers
// predate it, so the layout is spelled out here. An older kernel leaves it zeroed.
constexpr __u32 kLinkTypePerfEvent = 7;
enum : __u32 { kPerfUprobe = 1, kPerfUretprobe, kPerfKprobe, kPerfKretprobe, kPerfTracepoint, kPerfEvent };
struct PerfLinkInfo {
  __u32 type;
  __u32 id;
  __u32 prog_id;
  __u32 pad0;  // the union is 8-byte aligned
  __u32 perf_type;
  __u32 pad1;
  union {
    struct {
      __aligned_u64 file_name;
      __u32 name_len;
      __u32 offset;
      __u64 cookie;
      __u64 ref_ctr_offset;
    } uprobe;
    struct {
      __aligned_u64 func_name;
      __u32 name_len;
      __u32 offset;
      __u64 addr;
      __u64 missed;
      __u64 cookie;
    } kprobe;
    struct {
      __aligned_u64 tp_name;
      __u32 name_len;
      __u32 pad;
      __u64 cookie;
    } tracepoint;
  };
  unsigned char tail[64];  // room for the kernel's larger union
};

}  // namespace

ProbeStats::~ProbeStats() {
  if (stats_fd_ >= 0) close(stats_fd_);
}

bool ProbeStats::enable(std::string* error) {
  if (stats_fd_ >= 0) return true;
  int fd = bpf_enable_stats(BPF_STATS_RUN_TIME);
  if (fd < 0) {
    if (error) *error = std::string("BPF_ENABLE_STATS refused: ") + std::strerror(errno);
    return false;
  }
  stats_fd_ = fd;
  return true;
}

bool ProbeStats::read(int prog_fd, ProgramStats& out) {
  bpf_prog_info info{};
  __u32 len = sizeof(info);
  if (prog_fd < 0 || bpf_obj_get_info_by_fd(prog_fd, &info, &len) != 0) return false;
  out.run_cnt = info.run_cnt;
  out.run_time_ns = info.run_time_ns;
  out.recursion_misses = info.recursion_misses;
  out.prog_id = info.id;
  if (out.program.empty()) out.program = info.name;
  return true;
}

}  // namespace loupe

namespace loupe {

std::string ProbeStats::link_target(int link_fd) {
  if (link_fd < 0) return {};
  char name[512] = {};
  PerfLinkInfo info{};
  __u32 len = sizeof(info);
  // The name buffer is given for whichever arm the kernel fills; all three share the slot.
  info.uprobe.file_name = reinterpret_cast<__u64>(name);
  info.uprobe.name_len = sizeof(name);
  if (bpf_obj_get_info_by_fd(link_fd, &info, &len) != 0 || info.type != kLinkTypePerfEvent) return {};
  name[sizeof(name) - 1] = '\0';
  switch (info.perf_type) {
    case kPerfTracepoint: return std::string("tracepoint:") + name;
    case kPerfUprobe:
    case kPerfUretprobe:
      return fmt::format("{}:{}+{:#x}", info.perf_type == kPerfUprobe ? "uprobe" : "uretprobe", name, info.uprobe.offset);
    case kPerfKprobe:
    case kPerfKretprobe:
      return fmt::format("{}:{}", info.perf_type == kPerfKprobe ? "kprobe" : "kretprobe", name);
    case kPerfEvent: return "perf_event";
    default: return {};
  }
}

}  // namespace loupe
