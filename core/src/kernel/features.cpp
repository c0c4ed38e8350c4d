// SPDX-License-Identifier: Apache-2.0
//
// Kernel preflight by doing, not by reading version numbers: every attach kind is probed by
// loading a two-instruction program named "loupe_probe" and attaching it to a real hook,
// then closing everything. A result's reason names the hook it reached or the exact refusal.
#include "loupe/features.hpp"

#include <bpf/bpf.h>
#include <bpf/btf.h>
#include <bpf/libbpf.h>
#include <fcntl.h>
#include <gelf.h>
#include <libelf.h>
#include <linux/bpf.h>
#include <linux/capability.h>
#include <linux/magic.h>
#include <linux/perf_event.h>
#include <sys/ioctl.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <array>
#include <cerrno>
#include <climits>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <future>
#include <optional>
#include <sstream>
#include <string_view>
#include <thread>
#include <utility>
#include <vector>

#include "kernel/capabilities.hpp"
#include "symbols/elf_file.hpp"
#include "util/errno_text.hpp"
#include "util/unique_fd.hpp"

namespace loupe {
namespace {

constexpr const char* kProbeProgName = "loupe_probe";
constexpr const char* kTracefsPath = "/sys/kernel/tracing";
constexpr const char* kDebugfsTracingPath = "/sys/kernel/debug/tracing";
constexpr const char* kBpffsPath = "/sys/fs/bpf";
constexpr const char* kVmlinuxBtfPath = "/sys/kernel/btf/vmlinux";
constexpr const char* kPmuDir = "/sys/bus/event_source/devices";
constexpr const char* kDisableEnv = "LOUPE_DISABLE_FEATURES";
// Kernel functions that exist on every kernel loupe targets, are traceable, and are hit rarely.
constexpr std::array<const char*, 4> kKernelFuncCandidates = {"do_nanosleep", "hrtimer_nanosleep",
                                                              "do_sys_openat2", "vfs_read"};
// Tracepoints tried in order: the first is what the plugins use; the others survive kernels
// built without CONFIG_FTRACE_SYSCALLS.
constexpr std::array<const char*, 3> kTracepointCandidates = {
    "syscalls/sys_enter_getpid", "sched/sched_process_exec", "raw_syscalls/sys_enter"};

std::optional<std::string> read_trimmed(const std::string& path) {
  std::ifstream in(path);
  if (!in) return std::nullopt;
  std::stringstream ss;
  ss << in.rdbuf();
  std::string s = ss.str();
  while (!s.empty() && (s.back() == '\n' || s.back() == ' ')) s.pop_back();
  return s;
}

bool path_exists(const std::string& path) {
  struct stat st {};
  return ::stat(path.c_str(), &st) == 0;
}

std::string join(const std::vector<std::string>& parts, const char* sep) {
  std::string out;
  for (const auto& p : parts) out += (out.empty() ? "" : sep) + p;
  return out;
}

// Why privileged calls fail for the current process, appended to EPERM/EACCES messages.
std::string privilege_hint(int err, const char* needed) {
  if (err != EPERM && err != EACCES) return "";
  auto missing = missing_capabilities();
  if (!missing.empty())
    return std::string(" (needs ") + needed + "; missing " + join(missing, ", ") + ")";
  std::string hint =
      " though CAP_BPF, CAP_PERFMON and CAP_SYS_ADMIN are all effective: a kernel security policy "
      "refuses it";
  // securityfs shows the lockdown mode as "none [integrity] confidentiality" when mounted.
  if (auto lockdown = read_trimmed("/sys/kernel/security/lockdown")) {
    auto b = lockdown->find('['), e = lockdown->find(']');
    if (b != std::string::npos && e != std::string::npos && e > b)
      hint += " (lockdown=" + lockdown->substr(b + 1, e - b - 1) + ")";
  }
  return hint;
}

// The last verifier/kernel log line that says something, e.g. "attach to unsupported member".
std::string useful_log_line(const std::string& log) {
  std::vector<std::string> lines;
  std::istringstream in(log);
  for (std::string line; std::getline(in, line);) {
    while (!line.empty() && (line.back() == ' ' || line.back() == '\r')) line.pop_back();
    if (!line.empty() && line.rfind("processed ", 0) != 0) lines.push_back(line);
  }
  return lines.empty() ? "" : lines.back();
}

struct LoadedProg {
  UniqueFd fd;
  std::string error;  // "" when loaded
};

// mov r0, 0; exit — accepted by every program type, so a refusal is about the type or hook.
LoadedProg load_probe_prog(bpf_prog_type type, bpf_attach_type expected = bpf_attach_type{},
                           __u32 attach_btf_id = 0) {
  bpf_insn insns[2] = {};
  insns[0].code = BPF_ALU64 | BPF_MOV | BPF_K;
  insns[1].code = BPF_JMP | BPF_EXIT;
  std::array<char, 4096> log{};
  LIBBPF_OPTS(bpf_prog_load_opts, opts);
  opts.expected_attach_type = expected;
  opts.attach_btf_id = attach_btf_id;
  // With log_level 0 libbpf reloads with a log only on failure: no cost when it works.
  opts.log_buf = log.data();
  opts.log_size = log.size();
  LoadedProg out;
  int fd = bpf_prog_load(type, kProbeProgName, "GPL", insns, 2, &opts);
  if (fd >= 0) {
    out.fd = UniqueFd(fd);
    return out;
  }
  int err = errno;
  out.error = "load refused: " + errno_text(err) + privilege_hint(err, "CAP_BPF or CAP_SYS_ADMIN");
  std::string line = useful_log_line(std::string(log.data(), strnlen(log.data(), log.size())));
  if (!line.empty())
    out.error += "; verifier: " + line;
  else
    out.error += "; verifier log empty (refused before verification)";
  return out;
}

UniqueFd perf_event_open(perf_event_attr* attr, pid_t pid, int cpu, int* err) {
  attr->size = sizeof(*attr);
  int fd =
      static_cast<int>(::syscall(__NR_perf_event_open, attr, pid, cpu, -1, PERF_FLAG_FD_CLOEXEC));
  *err = fd < 0 ? errno : 0;
  return UniqueFd(fd);
}

std::string perf_open_error(const std::string& what, int err) {
  std::string msg = "perf_event_open(" + what + ") failed: " + errno_text(err);
  if (err == EACCES || err == EPERM) {
    auto paranoid = read_trimmed("/proc/sys/kernel/perf_event_paranoid");
    msg += privilege_hint(err, "CAP_PERFMON or CAP_SYS_ADMIN");
    if (paranoid) msg += ", kernel.perf_event_paranoid=" + *paranoid;
  }
  return msg;
}

// Attaches a loaded program to an opened perf event; "" on success.
std::string set_bpf(const UniqueFd& event, const UniqueFd& prog) {
  if (::ioctl(event.get(), PERF_EVENT_IOC_SET_BPF, prog.get()) == 0) return "";
  int err = errno;
  return "PERF_EVENT_IOC_SET_BPF refused: " + errno_text(err);
}

std::optional<int> pmu_type(const std::string& pmu) {
  auto text = read_trimmed(std::string(kPmuDir) + "/" + pmu + "/type");
  if (!text) return std::nullopt;
  char* end = nullptr;
  long v = std::strtol(text->c_str(), &end, 10);
  if (end == text->c_str()) return std::nullopt;
  return static_cast<int>(v);
}

// format/retprobe reads "config:0": the bit of attr.config that turns a probe into a return probe.
std::optional<int> pmu_retprobe_bit(const std::string& pmu) {
  auto text = read_trimmed(std::string(kPmuDir) + "/" + pmu + "/format/retprobe");
  if (!text || text->rfind("config:", 0) != 0) return std::nullopt;
  return std::atoi(text->c_str() + 7);
}

FeatureResult ok(std::string reason) {
  FeatureResult r;
  r.available = true;
  r.reason = std::move(reason);
  return r;
}

FeatureResult fail(std::string reason) {
  FeatureResult r;
  r.reason = std::move(reason);
  return r;
}

struct NamedCap {
  const char* feature;
  const char* name;
  int number;
};
constexpr std::array<NamedCap, 3> kCaps = {{{"cap_bpf", "CAP_BPF", kCapBpf},
                                            {"cap_perfmon", "CAP_PERFMON", kCapPerfmon},
                                            {"cap_sys_admin", "CAP_SYS_ADMIN", kCapSysAdmin}}};

bool is_mounted_as(const char* path, long magic) {
  struct statfs st {};
  return ::statfs(path, &st) == 0 && static_cast<long>(st.f_type) == magic;
}

std::string mount_error_text(const char* fs, const char* path, int err) {
  std::string msg = std::string("mount -t ") + fs + " at " + path + " failed: " + errno_text(err);
  if (err == ENODEV) msg += ": this kernel has no " + std::string(fs) + " filesystem";
  if (err == ENOENT) msg += ": mount point does not exist";
  msg += privilege_hint(err, "CAP_SYS_ADMIN");
  return msg;
}

// Mounts are system-wide state; serialise check-then-mount so two probers racing in one
// process do not stack two mounts on the same point.
std::mutex& mount_mutex() {
  static std::mutex mu;
  return mu;
}

std::string first_tracepoint_with_id(const std::string& tracefs, int* id) {
  for (const char* tp : kTracepointCandidates) {
    auto text = read_trimmed(tracefs + "/events/" + tp + "/id");
    if (text && !text->empty()) {
      *id = std::atoi(text->c_str());
      return tp;
    }
  }
  return "";
}

std::string colon_name(std::string tp) {
  auto slash = tp.find('/');
  if (slash != std::string::npos) tp[slash] = ':';
  return tp;
}

// Where a uprobe can be placed in our own binary without ever firing: the ELF entry point
// (_start) runs once, before main. Offsets in uprobe_path are file offsets, not addresses.
struct SelfEntry {
  std::string path;
  uint64_t file_offset = 0;
  std::string error;
};

SelfEntry self_entry_point() {
  SelfEntry out;
  std::array<char, PATH_MAX> buf{};
  ssize_t n = ::readlink("/proc/self/exe", buf.data(), buf.size() - 1);
  if (n <= 0) {
    out.error = "readlink(/proc/self/exe) failed: " + errno_text(errno);
    return out;
  }
  out.path.assign(buf.data(), static_cast<size_t>(n));
  const ElfFile file(out.path);
  Elf* elf = file.get();
  if (!elf) {
    out.error = out.path + ": " + file.error();
    return out;
  }
  GElf_Ehdr ehdr{};
  size_t phnum = 0;
  bool found = false;
  if (gelf_getehdr(elf, &ehdr) && elf_getphdrnum(elf, &phnum) == 0) {
    for (size_t i = 0; i < phnum && !found; ++i) {
      GElf_Phdr ph{};
      if (!gelf_getphdr(elf, static_cast<int>(i), &ph) || ph.p_type != PT_LOAD ||
          !(ph.p_flags & PF_X))
        continue;
      if (ehdr.e_entry >= ph.p_vaddr && ehdr.e_entry < ph.p_vaddr + ph.p_filesz) {
        out.file_offset = ehdr.e_entry - ph.p_vaddr + ph.p_offset;
        found = true;
      }
    }
  }
  if (!found) out.error = out.path + ": ELF entry point is in no executable PT_LOAD segment";
  return out;
}

std::string hex(uint64_t v) {
  std::ostringstream s;
  s << "0x" << std::hex << v;
  return s.str();
}

}  // namespace

// ---------------------------------------------------------------------------------------------
// Shared kernel facts, gathered on first use. vmlinux BTF is parsed once and released after the
// few ids the probes need are read: keeping ~10 MB of types alive for a session is waste.

class detail::FeatureProbeContext {
 public:
  // Each accessor holds mu_ while it gathers: probes run on several threads in all().
  const MountOutcome& tracefs() {
    std::lock_guard lock(mu_);
    if (!tracefs_) tracefs_ = mount_tracefs();
    return *tracefs_;
  }

  struct BtfFacts {
    std::string error;  // "" when vmlinux BTF parsed
    unsigned type_count = 0;
    std::string func_name;  // a kernel function fentry/fexit can target
    int func_id = -1;
    int sys_enter_typedef = -1;  // btf_trace_sys_enter, the tp_btf target
  };

  const BtfFacts& btf() {
    std::lock_guard lock(mu_);
    if (btf_) return *btf_;
    btf_.emplace();
    if (!path_exists(kVmlinuxBtfPath)) {
      btf_->error =
          std::string(kVmlinuxBtfPath) + " absent: kernel built without CONFIG_DEBUG_INFO_BTF";
      return *btf_;
    }
    struct btf* vmlinux = btf__load_vmlinux_btf();
    if (!vmlinux) {
      btf_->error = std::string(kVmlinuxBtfPath) + " does not parse: " + errno_text(errno);
      return *btf_;
    }
    btf_->type_count = btf__type_cnt(vmlinux);
    for (const char* fn : kKernelFuncCandidates) {
      int id = btf__find_by_name_kind(vmlinux, fn, BTF_KIND_FUNC);
      if (id > 0) {
        btf_->func_name = fn;
        btf_->func_id = id;
        break;
      }
    }
    btf_->sys_enter_typedef =
        btf__find_by_name_kind(vmlinux, "btf_trace_sys_enter", BTF_KIND_TYPEDEF);
    btf__free(vmlinux);
    return *btf_;
  }

  // First of kKernelFuncCandidates listed in /proc/kallsyms, "" if none.
  const std::string& kallsyms_target() {
    std::lock_guard lock(mu_);
    if (kallsyms_target_) return *kallsyms_target_;
    kallsyms_target_.emplace();
    std::ifstream in("/proc/kallsyms");
    std::set<std::string> seen;
    for (std::string line; std::getline(in, line);) {
      auto sp = line.rfind(' ');
      if (sp == std::string::npos) continue;
      std::string_view sym(line.c_str() + sp + 1);
      if (auto tab = sym.find('\t'); tab != std::string_view::npos) sym = sym.substr(0, tab);
      for (const char* fn : kKernelFuncCandidates)
        if (sym == fn) seen.insert(fn);
    }
    for (const char* fn : kKernelFuncCandidates) {
      if (seen.count(fn)) {
        *kallsyms_target_ = fn;
        break;
      }
    }
    return *kallsyms_target_;
  }

  // Closing a hook a probe attached waits for an RCU grace period (a uprobe's, tasks-trace
  // RCU: 40-80 ms here, two of them for uprobe and uretprobe): a session's start-up would
  // sleep through one for each feature it asks about. The probe's fds close on a thread of
  // their own instead, joined when the prober goes.
  void close_later(UniqueFd hook, UniqueFd prog) {
    std::lock_guard lock(mu_);
    closers_.emplace_back([h = std::move(hook), p = std::move(prog)]() mutable {
      h.reset();
      p.reset();
    });
  }
  ~FeatureProbeContext() {
    for (auto& t : closers_) t.join();
  }

 private:
  std::vector<std::thread> closers_;
  std::mutex mu_;
  std::optional<MountOutcome> tracefs_;
  std::optional<BtfFacts> btf_;
  std::optional<std::string> kallsyms_target_;
};

namespace {

using Ctx = detail::FeatureProbeContext;

// A probe that attached: its fds close in the background (Ctx::close_later).
FeatureResult attached(Ctx& ctx, UniqueFd hook, UniqueFd prog, std::string what) {
  ctx.close_later(std::move(hook), std::move(prog));
  return ok(std::move(what));
}

FeatureResult probe_bpf_syscall() {
  auto prog = load_probe_prog(BPF_PROG_TYPE_SOCKET_FILTER);
  if (!prog.fd.valid()) return fail("bpf(BPF_PROG_LOAD) of a socket filter: " + prog.error);
  return ok("bpf(BPF_PROG_LOAD) of a socket filter works");
}

FeatureResult probe_btf(Ctx& ctx) {
  const auto& facts = ctx.btf();
  if (!facts.error.empty()) return fail(facts.error);
  return ok(std::string(kVmlinuxBtfPath) + " parses (" + std::to_string(facts.type_count) +
            " types)");
}

FeatureResult from_mount(const MountOutcome& m, const char* fs) {
  if (!m.error.empty()) return fail(m.error);
  if (m.mounted_now) return ok(std::string(fs) + " mounted at " + m.path + " by loupe");
  return ok(std::string(fs) + " mounted at " + m.path);
}

FeatureResult probe_capability(const NamedCap& cap) {
  auto caps = effective_capabilities();
  if (!caps.ok) return fail(caps.error);
  if (caps.has(cap.number)) return ok(std::string(cap.name) + " in the effective set");
  std::string why = std::string(cap.name) + " not in the effective set";
  if (cap.number != kCapSysAdmin && caps.has(kCapSysAdmin))
    why += " (CAP_SYS_ADMIN, present, still grants what it guards)";
  return fail(why);
}

// Legacy kprobes: create a kprobe event through <tracefs>/kprobe_events, attach through its
// tracepoint id, then remove it. Used only on kernels whose kprobe PMU is missing (< 4.17).
FeatureResult probe_kprobe_legacy(const std::string& tracefs, const std::string& func,
                                  bool retprobe) {
  const std::string events = tracefs + "/kprobe_events";
  const std::string event = "loupe_probe_" + std::to_string(::getpid()) + (retprobe ? "_r" : "_p");
  auto write_events = [&](const std::string& line) -> int {
    UniqueFd fd(::open(events.c_str(), O_WRONLY | O_APPEND | O_CLOEXEC));
    if (!fd.valid()) return errno;
    return ::write(fd.get(), line.data(), line.size()) == static_cast<ssize_t>(line.size()) ? 0
                                                                                            : errno;
  };
  if (int err = write_events(std::string(retprobe ? "r" : "p") + ":kprobes/" + event + " " + func))
    return fail("kprobe PMU absent; adding " + func + " to " + events +
                " failed: " + errno_text(err));
  FeatureResult result;
  {
    auto id = read_trimmed(tracefs + "/events/kprobes/" + event + "/id");
    auto prog = load_probe_prog(BPF_PROG_TYPE_KPROBE);
    perf_event_attr attr{};
    attr.type = PERF_TYPE_TRACEPOINT;
    attr.config = id ? std::strtoull(id->c_str(), nullptr, 10) : 0;
    int err = 0;
    if (!id) {
      result = fail("kprobe event created but " + tracefs + "/events/kprobes/" + event +
                    "/id is missing");
    } else if (!prog.fd.valid()) {
      result = fail("kprobe program: " + prog.error);
    } else if (UniqueFd pe = perf_event_open(&attr, -1, 0, &err); !pe.valid()) {
      result = fail(perf_open_error("legacy kprobe " + func, err));
    } else if (auto e = set_bpf(pe, prog.fd); !e.empty()) {
      result = fail(e);
    } else {
      result = ok(std::string("attached to ") + (retprobe ? "return of " : "") + func + " via " +
                  events + " (no kprobe PMU)");
    }
  }
  write_events("-:kprobes/" + event);
  return result;
}

FeatureResult probe_kprobe(Ctx& ctx, bool retprobe) {
  const std::string pmu_dir = std::string(kPmuDir) + "/kprobe";
  auto type = pmu_type("kprobe");
  if (!type) {
    const auto& tfs = ctx.tracefs();
    if (!tfs.error.empty())
      return fail("kprobe PMU absent (" + pmu_dir + ") and tracefs unavailable: " + tfs.error);
    if (!path_exists(tfs.path + "/kprobe_events"))
      return fail("kprobe PMU absent (" + pmu_dir + ") and no " + tfs.path +
                  "/kprobe_events: kernel built without CONFIG_KPROBES");
    const std::string& func = ctx.kallsyms_target();
    if (func.empty()) return fail("no probe target function found in /proc/kallsyms");
    return probe_kprobe_legacy(tfs.path, func, retprobe);
  }
  const std::string& func = ctx.kallsyms_target();
  if (func.empty())
    return fail("kprobe PMU present but no probe target function found in /proc/kallsyms");
  perf_event_attr attr{};
  attr.type = static_cast<__u32>(*type);
  if (retprobe) {
    auto bit = pmu_retprobe_bit("kprobe");
    if (!bit)
      return fail("kprobe PMU has no " + pmu_dir + "/format/retprobe: return probes unsupported");
    attr.config |= 1ULL << *bit;
  }
  attr.config1 = reinterpret_cast<uintptr_t>(func.c_str());  // kprobe_func
  attr.config2 = 0;                                          // probe_offset
  auto prog = load_probe_prog(BPF_PROG_TYPE_KPROBE);
  if (!prog.fd.valid()) return fail("kprobe program: " + prog.error);
  int err = 0;
  UniqueFd pe = perf_event_open(&attr, -1, 0, &err);
  if (!pe.valid())
    return fail(perf_open_error(std::string(retprobe ? "kretprobe " : "kprobe ") + func, err));
  if (auto e = set_bpf(pe, prog.fd); !e.empty()) return fail(e);
  return attached(
      ctx, std::move(pe), std::move(prog.fd),
      std::string("attached to ") + (retprobe ? "return of " : "") + func + " via the kprobe PMU");
}

FeatureResult probe_fentry(Ctx& ctx, bool exit) {
  const auto& facts = ctx.btf();
  if (!facts.error.empty()) return fail("needs vmlinux BTF: " + facts.error);
  if (facts.func_id < 0)
    return fail("no candidate kernel function (do_nanosleep, ...) in vmlinux BTF");
  const bpf_attach_type at = exit ? BPF_TRACE_FEXIT : BPF_TRACE_FENTRY;
  auto prog = load_probe_prog(BPF_PROG_TYPE_TRACING, at, static_cast<__u32>(facts.func_id));
  if (!prog.fd.valid())
    return fail(std::string(exit ? "fexit" : "fentry") + " on " + facts.func_name + ": " +
                prog.error);
  // bpf_link_create for tracing programs arrived after BPF_RAW_TRACEPOINT_OPEN did the same job.
  UniqueFd link(bpf_link_create(prog.fd.get(), 0, at, nullptr));
  if (!link.valid()) link = UniqueFd(bpf_raw_tracepoint_open(nullptr, prog.fd.get()));
  if (!link.valid())
    return fail("loaded, but attach to " + facts.func_name + " refused: " + errno_text(errno));
  return attached(
      ctx, std::move(link), std::move(prog.fd),
      "attached to " + facts.func_name + " (BTF id " + std::to_string(facts.func_id) + ")");
}

FeatureResult probe_tracepoint(Ctx& ctx) {
  const auto& tfs = ctx.tracefs();
  if (!tfs.error.empty()) return fail("tracefs unavailable: " + tfs.error);
  int id = 0;
  std::string tp = first_tracepoint_with_id(tfs.path, &id);
  if (tp.empty())
    return fail(
        "none of syscalls/sys_enter_getpid, sched/sched_process_exec, raw_syscalls/sys_enter "
        "under " +
        tfs.path + "/events");
  auto prog = load_probe_prog(BPF_PROG_TYPE_TRACEPOINT);
  if (!prog.fd.valid()) return fail("tracepoint program: " + prog.error);
  perf_event_attr attr{};
  attr.type = PERF_TYPE_TRACEPOINT;
  attr.config = static_cast<__u64>(id);
  int err = 0;
  UniqueFd pe = perf_event_open(&attr, -1, 0, &err);
  if (!pe.valid()) return fail(perf_open_error("tracepoint " + colon_name(tp), err));
  if (auto e = set_bpf(pe, prog.fd); !e.empty()) return fail(e);
  return attached(ctx, std::move(pe), std::move(prog.fd), "attached to " + colon_name(tp));
}

FeatureResult probe_raw_tp(Ctx& ctx) {
  auto prog = load_probe_prog(BPF_PROG_TYPE_RAW_TRACEPOINT);
  if (!prog.fd.valid()) return fail("raw tracepoint program: " + prog.error);
  UniqueFd link(bpf_raw_tracepoint_open("sys_enter", prog.fd.get()));
  if (!link.valid())
    return fail("bpf_raw_tracepoint_open(sys_enter) refused: " + errno_text(errno));
  return attached(ctx, std::move(link), std::move(prog.fd), "attached to raw tracepoint sys_enter");
}

FeatureResult probe_tp_btf(Ctx& ctx) {
  const auto& facts = ctx.btf();
  if (!facts.error.empty()) return fail("needs vmlinux BTF: " + facts.error);
  if (facts.sys_enter_typedef < 0) return fail("typedef btf_trace_sys_enter not in vmlinux BTF");
  auto prog = load_probe_prog(BPF_PROG_TYPE_TRACING, BPF_TRACE_RAW_TP,
                              static_cast<__u32>(facts.sys_enter_typedef));
  if (!prog.fd.valid()) return fail("tp_btf on sys_enter: " + prog.error);
  UniqueFd link(bpf_raw_tracepoint_open(nullptr, prog.fd.get()));
  if (!link.valid()) return fail("loaded, but attach to sys_enter refused: " + errno_text(errno));
  return attached(ctx, std::move(link), std::move(prog.fd),
                  "attached to sys_enter through BTF (btf_trace_sys_enter)");
}

FeatureResult probe_uprobe(Ctx& ctx, bool retprobe) {
  const std::string pmu_dir = std::string(kPmuDir) + "/uprobe";
  auto type = pmu_type("uprobe");
  if (!type)
    return fail("uprobe PMU absent (" + pmu_dir + "): kernel built without CONFIG_UPROBE_EVENTS");
  perf_event_attr attr{};
  attr.type = static_cast<__u32>(*type);
  if (retprobe) {
    auto bit = pmu_retprobe_bit("uprobe");
    if (!bit)
      return fail("uprobe PMU has no " + pmu_dir + "/format/retprobe: return probes unsupported");
    attr.config |= 1ULL << *bit;
  }
  auto target = self_entry_point();
  if (!target.error.empty()) return fail("no uprobe target: " + target.error);
  attr.config1 = reinterpret_cast<uintptr_t>(target.path.c_str());  // uprobe_path
  attr.config2 = target.file_offset;                                // probe_offset
  auto prog = load_probe_prog(BPF_PROG_TYPE_KPROBE);
  if (!prog.fd.valid()) return fail("uprobe program: " + prog.error);
  int err = 0;
  // Our own process only: the breakpoint never lands in another process's copy of the binary.
  UniqueFd pe = perf_event_open(&attr, 0, -1, &err);
  const std::string where = target.path + "+" + hex(target.file_offset);
  if (!pe.valid())
    return fail(perf_open_error(std::string(retprobe ? "uretprobe " : "uprobe ") + where, err));
  if (auto e = set_bpf(pe, prog.fd); !e.empty()) return fail(e);
  return attached(
      ctx, std::move(pe), std::move(prog.fd),
      std::string("attached to ") + (retprobe ? "return of " : "") + where + " (ELF entry point)");
}

FeatureResult probe_perf_event() {
  auto prog = load_probe_prog(BPF_PROG_TYPE_PERF_EVENT);
  if (!prog.fd.valid()) return fail("perf_event program: " + prog.error);
  perf_event_attr attr{};
  attr.type = PERF_TYPE_SOFTWARE;
  attr.config = PERF_COUNT_SW_CPU_CLOCK;
  attr.freq = 1;
  attr.sample_freq = 49;
  attr.disabled = 1;  // attaching is what is probed; sampling would only burn CPU
  int err = 0;
  UniqueFd pe = perf_event_open(&attr, -1, 0, &err);
  if (!pe.valid()) return fail(perf_open_error("cpu-clock sampling on cpu 0", err));
  if (auto e = set_bpf(pe, prog.fd); !e.empty()) return fail(e);
  return ok("attached to cpu-clock sampling (49 Hz) on cpu 0");
}

FeatureResult probe_map(bpf_map_type type, const char* what) {
  int rc = libbpf_probe_bpf_map_type(type, nullptr);
  if (rc == 1) return ok(std::string(what) + " map created");
  if (rc == 0) return fail(std::string(what) + " map type refused by this kernel");
  return fail(std::string(what) + " map probe failed: " + errno_text(rc) +
              privilege_hint(-rc, "CAP_BPF or CAP_SYS_ADMIN"));
}

FeatureResult probe_helper(bpf_prog_type prog_type, const char* prog_name, bpf_func_id helper,
                           const char* what) {
  int rc = libbpf_probe_bpf_helper(prog_type, helper, nullptr);
  const std::string in = std::string(what) + " in a " + prog_name + " program";
  if (rc == 1) return ok(in + " accepted by the verifier");
  if (rc == 0) return fail(in + " rejected by the verifier (unknown or disallowed helper)");
  return fail(in + ": probe failed: " + errno_text(rc) +
              privilege_hint(-rc, "CAP_BPF or CAP_SYS_ADMIN"));
}

// Every feature loupe knows, once: its name (what plugins ask for and --disable-feature
// takes), category, what it is, and how it is probed. The preflight's order is this order;
// docs/cli.md's feature table is checked against it (tests/cli/features_doc_test.sh).
struct FeatureEntry {
  FeatureInfo info;
  FeatureResult (*probe)(Ctx& ctx);
};

const NamedCap& cap_named(const char* feature) {
  for (const auto& cap : kCaps)
    if (std::string_view(cap.feature) == feature) return cap;
  return kCaps[0];  // unreachable: every capability entry below names one of kCaps
}

// clang-format off
const FeatureEntry kFeatures[] = {
    {{"bpf_syscall", "syscall", "the bpf() system call loads a program"},
     [](Ctx&) { return probe_bpf_syscall(); }},
    {{"btf", "filesystem", "the kernel's own type information (/sys/kernel/btf/vmlinux): CO-RE, tp_btf, fentry"},
     [](Ctx& c) { return probe_btf(c); }},
    {{"tracefs", "filesystem", "tracefs mounted (or mountable): tracepoint ids, legacy kprobes"},
     [](Ctx& c) { return from_mount(c.tracefs(), "tracefs"); }},
    {{"bpffs", "filesystem", "the BPF filesystem mounted (or mountable) at /sys/fs/bpf"},
     [](Ctx&) { return from_mount(mount_bpffs(), "bpffs"); }},
    {{"cap_bpf", "capability", "CAP_BPF in the effective set: load programs, create maps"},
     [](Ctx&) { return probe_capability(cap_named("cap_bpf")); }},
    {{"cap_perfmon", "capability", "CAP_PERFMON in the effective set: perf events, tracing programs"},
     [](Ctx&) { return probe_capability(cap_named("cap_perfmon")); }},
    {{"cap_sys_admin", "capability", "CAP_SYS_ADMIN in the effective set: grants both of the above"},
     [](Ctx&) { return probe_capability(cap_named("cap_sys_admin")); }},
    {{"kprobe", "attach", "kprobes on kernel function entry (perf PMU, or tracefs on old kernels)"},
     [](Ctx& c) { return probe_kprobe(c, false); }},
    {{"kretprobe", "attach", "kretprobes on kernel function return"},
     [](Ctx& c) { return probe_kprobe(c, true); }},
    {{"fentry", "attach", "BPF trampolines on kernel function entry (cheaper than kprobes)"},
     [](Ctx& c) { return probe_fentry(c, false); }},
    {{"fexit", "attach", "BPF trampolines on kernel function return, with the arguments"},
     [](Ctx& c) { return probe_fentry(c, true); }},
    {{"tracepoint", "attach", "classic tracepoints (perf_event_open on a tracefs event id)"},
     [](Ctx& c) { return probe_tracepoint(c); }},
    {{"raw_tp", "attach", "raw tracepoints: the tracepoint's arguments without the format copy"},
     [](Ctx& c) { return probe_raw_tp(c); }},
    {{"tp_btf", "attach", "BTF-typed raw tracepoints: typed arguments, direct reads"},
     [](Ctx& c) { return probe_tp_btf(c); }},
    {{"uprobe", "attach", "uprobes on user function entry (and USDT probes)"},
     [](Ctx& c) { return probe_uprobe(c, false); }},
    {{"uretprobe", "attach", "uretprobes on user function return"},
     [](Ctx& c) { return probe_uprobe(c, true); }},
    {{"perf_event", "attach", "BPF on perf events: CPU sampling, hardware counters"},
     [](Ctx&) { return probe_perf_event(); }},
    {{"ringbuf", "map", "BPF ring buffers (5.8+): ordered records, reserve/commit, no per-CPU copies"},
     [](Ctx&) { return probe_map(BPF_MAP_TYPE_RINGBUF, "ringbuf"); }},
    {{"stack_trace", "map", "stack-trace maps: deduplicated kernel and user stacks"},
     [](Ctx&) { return probe_map(BPF_MAP_TYPE_STACK_TRACE, "stack_trace"); }},
    {{"percpu_hash", "map", "per-CPU hash maps: counters without atomics"},
     [](Ctx&) { return probe_map(BPF_MAP_TYPE_PERCPU_HASH, "percpu_hash"); }},
    {{"bpf_cookie", "helper", "bpf_get_attach_cookie: one program for many attach points"},
     [](Ctx&) { return probe_helper(BPF_PROG_TYPE_KPROBE, "kprobe/uprobe", BPF_FUNC_get_attach_cookie, "bpf_get_attach_cookie"); }},
    {{"get_stackid", "helper", "bpf_get_stackid: stack ids into a stack-trace map"},
     [](Ctx&) { return probe_helper(BPF_PROG_TYPE_TRACEPOINT, "tracepoint", BPF_FUNC_get_stackid, "bpf_get_stackid"); }},
    {{"ringbuf_query", "helper", "bpf_ringbuf_query: a ring's fill level, for in-kernel backpressure"},
     [](Ctx&) { return probe_helper(BPF_PROG_TYPE_TRACEPOINT, "tracepoint", BPF_FUNC_ringbuf_query, "bpf_ringbuf_query"); }},
    {{"ktime_get_boot_ns", "helper", "bpf_ktime_get_boot_ns: a clock that counts suspend"},
     [](Ctx&) { return probe_helper(BPF_PROG_TYPE_TRACEPOINT, "tracepoint", BPF_FUNC_ktime_get_boot_ns, "bpf_ktime_get_boot_ns"); }},
    {{"bpf_loop", "helper", "bpf_loop (5.17+): the in-kernel unwinder's frames (unwind = \"tables\", the default; without it, frame pointers)"},
     [](Ctx&) { return probe_helper(BPF_PROG_TYPE_PERF_EVENT, "perf_event", BPF_FUNC_loop, "bpf_loop"); }},
    {{"find_vma", "helper", "bpf_find_vma (5.17+): the in-kernel unwinder finds the mapping of a pc its tables do not index"},
     [](Ctx&) { return probe_helper(BPF_PROG_TYPE_PERF_EVENT, "perf_event", BPF_FUNC_find_vma, "bpf_find_vma"); }},
};
// clang-format on

const FeatureEntry* find_feature(const std::string& name) {
  for (const auto& f : kFeatures)
    if (name == f.info.name) return &f;
  return nullptr;
}

std::set<std::string> env_forced_off() {
  std::set<std::string> out;
  const char* env = std::getenv(kDisableEnv);
  if (!env) return out;
  std::istringstream in(env);
  for (std::string item; std::getline(in, item, ',');) {
    auto b = item.find_first_not_of(" \t");
    auto e = item.find_last_not_of(" \t");
    if (b != std::string::npos) out.insert(item.substr(b, e - b + 1));
  }
  return out;
}

}  // namespace

// ---------------------------------------------------------------------------------------------

MountOutcome mount_tracefs() {
  std::lock_guard lock(mount_mutex());
  MountOutcome out;
  for (const char* path : {kTracefsPath, kDebugfsTracingPath}) {
    if (is_mounted_as(path, TRACEFS_MAGIC)) {
      out.path = path;
      return out;
    }
  }
  if (::mount("nodev", kTracefsPath, "tracefs", 0, nullptr) != 0) {
    out.error = mount_error_text("tracefs", kTracefsPath, errno);
    return out;
  }
  out.path = kTracefsPath;
  out.mounted_now = true;
  return out;
}

MountOutcome mount_bpffs() {
  std::lock_guard lock(mount_mutex());
  MountOutcome out;
  if (is_mounted_as(kBpffsPath, BPF_FS_MAGIC)) {
    out.path = kBpffsPath;
    return out;
  }
  // Same mode systemd and bpftool use: pinned objects are root's business.
  if (::mount("bpf", kBpffsPath, "bpf", 0, "mode=0700") != 0) {
    out.error = mount_error_text("bpf", kBpffsPath, errno);
    return out;
  }
  out.path = kBpffsPath;
  out.mounted_now = true;
  return out;
}

std::vector<std::string> missing_capabilities() {
  auto caps = effective_capabilities();
  std::vector<std::string> missing;
  for (const auto& cap : kCaps)
    if (!caps.ok || !caps.has(cap.number)) missing.emplace_back(cap.name);
  return missing;
}

KernelFeatureProber::KernelFeatureProber(std::set<std::string> forced_off)
    : ctx_(std::make_shared<detail::FeatureProbeContext>()), forced_off_(std::move(forced_off)) {
  forced_off_.merge(env_forced_off());
}

const std::vector<FeatureInfo>& KernelFeatureProber::table() {
  static const std::vector<FeatureInfo> infos = [] {
    std::vector<FeatureInfo> out;
    for (const auto& f : kFeatures) out.push_back(f.info);
    return out;
  }();
  return infos;
}

FeatureResult KernelFeatureProber::get(const std::string& name) {
  {
    std::lock_guard lock(mu_);
    if (auto it = cache_.find(name); it != cache_.end()) return it->second;
  }
  FeatureResult result;
  const FeatureEntry* entry = find_feature(name);
  if (!entry) {
    result.name = name;
    result.reason = "unknown feature";
    return result;  // not cached: callers may ask for anything
  }
  if (forced_off_.count(name)) {
    result.forced_off = true;
    result.reason = "disabled by --disable-feature";
  } else {
    result = entry->probe(*ctx_);
  }
  result.name = name;
  result.category = entry->info.category;
  // Probing ran unlocked; if another thread finished the same probe first, keep its answer so
  // every caller sees one result per feature.
  std::lock_guard lock(mu_);
  return cache_.emplace(name, result).first->second;
}

std::vector<FeatureResult> KernelFeatureProber::all() {
  // Closing a tracepoint or uprobe perf event waits for an RCU grace period (~100 ms on these
  // VMs); attach probes run on their own threads so those waits overlap instead of adding up.
  const auto& infos = table();
  std::vector<std::future<FeatureResult>> attach(infos.size());
  for (size_t i = 0; i < infos.size(); ++i) {
    if (std::string_view(infos[i].category) == "attach")
      attach[i] = std::async(std::launch::async,
                             [this, name = std::string(infos[i].name)] { return get(name); });
  }
  std::vector<FeatureResult> out;
  out.reserve(infos.size());
  for (size_t i = 0; i < infos.size(); ++i)
    out.push_back(attach[i].valid() ? attach[i].get() : get(infos[i].name));
  return out;
}

}  // namespace loupe
