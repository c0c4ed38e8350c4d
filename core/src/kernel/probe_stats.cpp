// SPDX-License-Identifier: Apache-2.0
#include "kernel/probe_stats.hpp"

#include <bpf/bpf.h>
#include <bpf/btf.h>
#include <linux/bpf.h>
#include <unistd.h>

#include <fmt/format.h>
#include <cerrno>
#include <cstring>
#include <memory>
#include <mutex>
#include <string_view>

namespace loupe {
namespace {

// The perf_event arm of struct bpf_link_info (kernel 6.6+); Debian 12's uapi headers
// predate it, so the layout is spelled out here. An older kernel leaves it zeroed.
constexpr __u32 kLinkTypePerfEvent = 7;
enum : __u32 {
  kPerfUprobe = 1,
  kPerfUretprobe,
  kPerfKprobe,
  kPerfKretprobe,
  kPerfTracepoint,
  kPerfEvent
};
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

// The kernel's BTF and its object id, loaded on the first tracing link to name (~50 ms) and
// kept: a tp_btf or fentry link says only which BTF object and type it is attached to.
struct KernelBtf {
  std::unique_ptr<btf, void (*)(btf*)> types{nullptr, btf__free};
  __u32 obj_id = 0;
};

const KernelBtf& kernel_btf() {
  static std::once_flag once;
  static KernelBtf k;
  std::call_once(once, [] {
    btf* b = btf__load_vmlinux_btf();
    if (libbpf_get_error(b) == 0) k.types.reset(b);
    for (__u32 id = 0; bpf_btf_get_next_id(id, &id) == 0;) {
      int fd = bpf_btf_get_fd_by_id(id);
      if (fd < 0) continue;
      char name[64] = {};
      bpf_btf_info info{};
      info.name = reinterpret_cast<__u64>(name);
      info.name_len = sizeof(name);
      __u32 len = sizeof(info);
      bool vmlinux = bpf_obj_get_info_by_fd(fd, &info, &len) == 0 && info.kernel_btf &&
                     std::string_view(name) == "vmlinux";
      close(fd);
      if (vmlinux) {
        k.obj_id = id;
        break;
      }
    }
  });
  return k;
}

// "tp_btf:block_rq_issue", "fentry:vfs_read", ...; empty when the type cannot be named.
std::string tracing_target(const bpf_link_info& info) {
  // A module's function or tracepoint would need that module's split BTF: left unnamed.
  const KernelBtf& k = kernel_btf();
  const btf* b = k.types && info.tracing.target_obj_id == k.obj_id ? k.types.get() : nullptr;
  const btf_type* t = b ? btf__type_by_id(b, info.tracing.target_btf_id) : nullptr;
  const char* name = t ? btf__name_by_offset(b, t->name_off) : nullptr;
  if (!name || !*name) return {};
  std::string_view n(name);
  switch (info.tracing.attach_type) {
    case BPF_TRACE_RAW_TP: {
      constexpr std::string_view kPrefix = "btf_trace_";  // the typedef tp_btf attaches to
      if (n.substr(0, kPrefix.size()) == kPrefix) n.remove_prefix(kPrefix.size());
      return "tp_btf:" + std::string(n);
    }
    case BPF_TRACE_FENTRY: return "fentry:" + std::string(n);
    case BPF_TRACE_FEXIT: return "fexit:" + std::string(n);
    default: return {};
  }
}

}  // namespace

ProbeStats::~ProbeStats() {
  if (stats_fd_ >= 0) close(stats_fd_);
}

Status ProbeStats::enable() {
  if (stats_fd_ >= 0) return {};
  int fd = bpf_enable_stats(BPF_STATS_RUN_TIME);
  if (fd < 0) return make_error(std::string("BPF_ENABLE_STATS refused: ") + std::strerror(errno));
  stats_fd_ = fd;
  return {};
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
  {
    // Links that are not perf events: raw tracepoints name themselves, tracing links
    // (tp_btf, fentry) give a BTF type id.
    bpf_link_info li{};
    __u32 li_len = sizeof(li);
    if (bpf_obj_get_info_by_fd(link_fd, &li, &li_len) != 0) return {};
    if (li.type == BPF_LINK_TYPE_TRACING) return tracing_target(li);
    if (li.type == BPF_LINK_TYPE_RAW_TRACEPOINT) {
      li = {};
      li.raw_tracepoint.tp_name = reinterpret_cast<__u64>(name);
      li.raw_tracepoint.tp_name_len = sizeof(name);
      li_len = sizeof(li);
      if (bpf_obj_get_info_by_fd(link_fd, &li, &li_len) != 0) return {};
      name[sizeof(name) - 1] = '\0';
      return std::string("raw_tp:") + name;
    }
  }
  PerfLinkInfo info{};
  __u32 len = sizeof(info);
  // The name buffer is given for whichever arm the kernel fills; all three share the slot.
  info.uprobe.file_name = reinterpret_cast<__u64>(name);
  info.uprobe.name_len = sizeof(name);
  if (bpf_obj_get_info_by_fd(link_fd, &info, &len) != 0 || info.type != kLinkTypePerfEvent)
    return {};
  name[sizeof(name) - 1] = '\0';
  switch (info.perf_type) {
    case kPerfTracepoint: return std::string("tracepoint:") + name;
    case kPerfUprobe:
    case kPerfUretprobe:
      return fmt::format("{}:{}+{:#x}", info.perf_type == kPerfUprobe ? "uprobe" : "uretprobe",
                         name, info.uprobe.offset);
    case kPerfKprobe:
    case kPerfKretprobe:
      return fmt::format("{}:{}", info.perf_type == kPerfKprobe ? "kprobe" : "kretprobe", name);
    case kPerfEvent: return "perf_event";
    default: return {};
  }
}

}  // namespace loupe
