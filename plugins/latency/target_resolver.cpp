// SPDX-License-Identifier: Apache-2.0
#include "target_resolver.hpp"

#include <regex>
#include <stdexcept>

#include "loupe/sdk/plugin.hpp"
#include "loupe/sdk/uprobe.hpp"
#include "loupe/sdk/usdt.hpp"

namespace loupe::latency {
namespace {

// An executable (a program a process runs) rather than a shared library: it asks for an
// interpreter, or is not position-independent at all.
// A library names itself (DT_SONAME); a PIE executable does not. glibc's libc.so.6 also
// has an interpreter (it runs and prints its version), so PT_INTERP alone called it a
// program, and a malloc probe that never fired warned that the target never ran libc.
bool has_soname(Elf* elf) {
  for (Elf_Scn* scn = nullptr; (scn = elf_nextscn(elf, scn)) != nullptr;) {
    GElf_Shdr sh;
    if (!gelf_getshdr(scn, &sh) || sh.sh_type != SHT_DYNAMIC) continue;
    Elf_Data* data = elf_getdata(scn, nullptr);
    for (std::size_t i = 0; data && sh.sh_entsize && i < sh.sh_size / sh.sh_entsize; ++i) {
      GElf_Dyn dyn;
      if (gelf_getdyn(data, static_cast<int>(i), &dyn) && dyn.d_tag == DT_SONAME) return true;
    }
  }
  return false;
}

bool is_program(const std::string& path) {
  sdk::detail::ElfFile file(path);
  GElf_Ehdr eh;
  if (!gelf_getehdr(file.get(), &eh)) return false;
  if (eh.e_type == ET_EXEC) return true;
  std::size_t n = 0;
  if (elf_getphdrnum(file.get(), &n) != 0) return false;
  for (std::size_t i = 0; i < n; ++i) {
    GElf_Phdr ph;
    if (gelf_getphdr(file.get(), static_cast<int>(i), &ph) && ph.p_type == PT_INTERP)
      return !has_soname(file.get());
  }
  return false;
}

std::vector<ProbeSite> name_sites(const std::string& path,
                                  const std::vector<std::uint64_t>& vaddrs) {
  std::vector<ProbeSite> out;
  for (const auto& a : sdk::describe_elf_addresses(path, vaddrs))
    if (a.file_offset) out.push_back({*a.file_offset, a.site()});
  return out;
}

}  // namespace

const char* to_string(Mechanism m) {
  switch (m) {
    case Mechanism::kFentry: return "fentry";
    case Mechanism::kKprobe: return "kprobe";
    case Mechanism::kUprobe: return "uprobe";
    case Mechanism::kTracepoint: return "tracepoint";
    case Mechanism::kUsdt: return "usdt";
  }
  return "?";
}

std::string ResolvedTarget::probe_label() const {
  switch (mechanism) {
    case Mechanism::kFentry: return "fentry:" + spec.kernel_function;
    case Mechanism::kKprobe: return "kprobe:" + spec.kernel_function;
    case Mechanism::kUprobe: return "uprobe:" + binary_path + ":" + spec.symbol;
    case Mechanism::kTracepoint: return "tracepoint:" + spec.entry.full();
    case Mechanism::kUsdt: return "usdt:" + binary_path + ":" + spec.usdt_entry.full();
  }
  return "?";
}

TargetResolver::TargetResolver(const sdk::Host& host, const LibraryResolver& libraries,
                               int fentry_slots, int target_pid)
    : host_(host),
      libraries_(libraries),
      fentry_slots_left_(fentry_slots),
      target_pid_(target_pid) {}

ResolvedTarget TargetResolver::resolve(const TargetSpec& spec) {
  switch (spec.kind) {
    case TargetKind::kKernelFunction: return resolve_kernel_function(spec);
    case TargetKind::kUserFunction: return resolve_user_function(spec);
    case TargetKind::kTracepointPair:
    case TargetKind::kSyscall: return resolve_tracepoints(spec);
    case TargetKind::kUsdtPair:
    case TargetKind::kUsdtCount: return resolve_usdt(spec);
  }
  throw sdk::Error(LOUPE_ERR_INTERNAL, "unknown target kind");
}

ResolvedTarget TargetResolver::resolve_kernel_function(const TargetSpec& spec) {
  const std::string who = "target '" + spec.name + "' (" + spec.spec_text + ")";
  if (!host_.ksym_exists(spec.kernel_function))
    throw sdk::Error(LOUPE_ERR_NOT_FOUND, who + ": kernel function '" + spec.kernel_function +
                                              "' is not in /proc/kallsyms (misspelled, "
                                              "inlined, or in a module not loaded?)");
  ResolvedTarget t{spec};
  std::string fentry_why, kprobe_why;
  bool fentry = host_.feature("fentry", &fentry_why);
  if (fentry && fentry_slots_left_ > 0) {
    t.mechanism = Mechanism::kFentry;
    t.fentry_slot = next_fentry_slot_++;
    --fentry_slots_left_;
    return t;
  }
  if (fentry) fentry_why = "all " + std::to_string(next_fentry_slot_) + " fentry slots used";
  if (host_.feature("kprobe", &kprobe_why)) {
    t.mechanism = Mechanism::kKprobe;
    return t;
  }
  // The usual case on kernels built without CONFIG_KPROBES and with fentry refused: point
  // at the stable tracepoint that covers the same path.
  std::string hint =
      "trace a tracepoint pair instead, e.g. syscall = \"read\" (the read(2) path "
      "that reaches vfs_read), or tracepoint_entry = \"syscalls:sys_enter_read\" "
      "+ tracepoint_exit = \"syscalls:sys_exit_read\"; see docs/latency.md";
  throw sdk::Error(LOUPE_ERR_UNSUPPORTED,
                   who + " cannot be traced on this kernel: fentry/fexit unavailable (" +
                       (fentry_why.empty() ? "refused" : fentry_why) +
                       ") and kprobe/kretprobe unavailable (" +
                       (kprobe_why.empty() ? "not built in" : kprobe_why) + "); " + hint);
}

ResolvedTarget TargetResolver::resolve_user_function(const TargetSpec& spec) {
  const std::string who = "target '" + spec.name + "' (" + spec.spec_text + ")";
  std::string why;
  if (!host_.feature("uprobe", &why))
    throw sdk::Error(LOUPE_ERR_UNSUPPORTED,
                     who + ": uprobes unavailable on this kernel (" + why + ")");
  ResolvedTarget t{spec};
  t.mechanism = Mechanism::kUprobe;
  try {
    t.binary_path = libraries_.resolve(spec.binary, target_pid_);
    const auto fn = sdk::find_elf_function(t.binary_path, spec.symbol, spec.symbol_offset);
    t.file_offset = fn.file_offset;
    t.sites = name_sites(t.binary_path, {fn.address + spec.symbol_offset});
    t.binary_is_program = is_program(t.binary_path);
  } catch (const std::runtime_error& e) {
    throw sdk::Error(LOUPE_ERR_NOT_FOUND, who + ": " + e.what());
  }
  return t;
}

namespace {
// "python3.11" / "libpython3.12.so.1.0" -> 11 / 12; -1 when the name says no version.
int python3_minor(const std::string& path) {
  std::smatch m;
  static const std::regex re("python3\\.([0-9]+)");
  return std::regex_search(path, m, re) ? std::stoi(m[1]) : -1;
}
}  // namespace

// Probes whose numbers mislead on some runtimes are said so before the report: CPython
// 3.11+ runs most Python-to-Python calls inside one C frame without firing
// function__entry / function__return.
void TargetResolver::warn_incomplete_probes(const ResolvedTarget& t) const {
  if (t.spec.usdt_entry.provider != "python" || t.spec.usdt_entry.name.rfind("function__", 0) != 0)
    return;
  const int minor = python3_minor(t.binary_path);
  if (minor >= 0 && minor < 11) return;
  host_.warn("target '" + t.spec.name + "': " + t.binary_path +
             (minor >= 11 ? " is Python 3." + std::to_string(minor) : " may be Python 3.11+") +
             ", which fires python:function__entry/return only for calls it does not inline: "
             "per-function counts and times from them are incomplete (profile the interpreter "
             "with cpusample unwind = \"dwarf\" instead)");
}

// The probes are looked up in the file's notes here, so a misspelt name is refused with
// the list of what the binary has rather than libbpf's bare ENOENT at attach.
ResolvedTarget TargetResolver::resolve_usdt(const TargetSpec& spec) {
  const std::string who = "target '" + spec.name + "' (" + spec.spec_text + ")";
  std::string why;
  if (!host_.feature("uprobe", &why))
    throw sdk::Error(LOUPE_ERR_UNSUPPORTED,
                     who + ": USDT probes are uprobes, unavailable on this kernel (" + why + ")");
  ResolvedTarget t{spec};
  t.mechanism = Mechanism::kUsdt;
  std::vector<sdk::UsdtProbe> probes;
  try {
    t.binary_path = libraries_.resolve(spec.binary, target_pid_);
    probes = sdk::read_usdt_probes(t.binary_path);
  } catch (const std::runtime_error& e) {
    throw sdk::Error(LOUPE_ERR_NOT_FOUND, who + ": " + e.what());
  }
  auto sites = [&](const UsdtName& u) {
    std::size_t n = 0;
    for (const auto& p : probes) n += p.provider == u.provider && p.name == u.name;
    return n;
  };
  std::vector<const UsdtName*> wanted = {&spec.usdt_entry};
  if (spec.kind == TargetKind::kUsdtPair) wanted.push_back(&spec.usdt_exit);
  for (const UsdtName* u : wanted) {
    if (sites(*u)) continue;
    std::string have;
    for (const auto& p : probes) {
      std::string n = p.provider + ":" + p.name;
      if (have.find(n + ",") == std::string::npos && !have.ends_with(n))
        have += (have.empty() ? "" : ", ") + n;
    }
    throw sdk::Error(LOUPE_ERR_NOT_FOUND,
                     who + ": " + t.binary_path + " has no USDT probe " + u->full() +
                         (probes.empty() ? " (it has no USDT notes at all)" : "; it has: " + have));
  }
  t.usdt_sites = sites(spec.usdt_entry);
  // Named from the file now: the processes that fire them may be gone by the report.
  std::vector<std::uint64_t> pcs;
  for (const auto& p : probes)
    if (p.provider == spec.usdt_entry.provider && p.name == spec.usdt_entry.name)
      pcs.push_back(p.pc);
  try {
    t.sites = name_sites(t.binary_path, pcs);
    t.binary_is_program = is_program(t.binary_path);
  } catch (const std::runtime_error& e) {
    throw sdk::Error(LOUPE_ERR_NOT_FOUND, who + ": " + e.what());
  }
  warn_incomplete_probes(t);
  if (spec.label_arg >= 0) {
    for (const auto& p : probes) {
      if (p.provider != spec.usdt_entry.provider || p.name != spec.usdt_entry.name) continue;
      if (static_cast<std::size_t>(spec.label_arg) >= p.arg_count())
        throw sdk::Error(LOUPE_ERR_INVALID_ARG,
                         who + ": label_arg = " + std::to_string(spec.label_arg) + " but " +
                             spec.usdt_entry.full() + " has " + std::to_string(p.arg_count()) +
                             " argument(s) (" + (p.args.empty() ? "none" : p.args) + ")");
      break;
    }
  }
  return t;
}

ResolvedTarget TargetResolver::resolve_tracepoints(const TargetSpec& spec) {
  const std::string who = "target '" + spec.name + "' (" + spec.spec_text + ")";
  std::string why;
  if (!host_.feature("tracepoint", &why))
    throw sdk::Error(LOUPE_ERR_UNSUPPORTED,
                     who + ": tracepoint programs unavailable (" + why + ")");
  for (const auto* tp : {&spec.entry, &spec.exit}) {
    if (!host_.tracepoint_exists(tp->full())) {
      std::string msg = who + ": tracepoint " + tp->full() + " does not exist";
      if (spec.kind == TargetKind::kSyscall)
        msg +=
            " (unknown syscall name, or a kernel without CONFIG_FTRACE_SYSCALLS; names are "
            "as in /sys/kernel/tracing/events/syscalls, e.g. \"read\", \"clock_nanosleep\")";
      else
        msg += " (see /sys/kernel/tracing/available_events)";
      throw sdk::Error(LOUPE_ERR_NOT_FOUND, msg);
    }
  }
  ResolvedTarget t{spec};
  t.mechanism = Mechanism::kTracepoint;
  return t;
}

}  // namespace loupe::latency
