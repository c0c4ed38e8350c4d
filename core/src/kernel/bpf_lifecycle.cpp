// SPDX-License-Identifier: Apache-2.0
#include "kernel/bpf_lifecycle.hpp"

#include "loupe/sdk/uprobe.hpp"

#include <bpf/libbpf.h>
#include <fcntl.h>
#include <fmt/format.h>
#include <spdlog/spdlog.h>
#include <unistd.h>

#include <algorithm>
#include <cstdarg>
#include <cstring>
#include <memory>
#include <sstream>

namespace loupe {
namespace {

int libbpf_print(enum libbpf_print_level level, const char* fmt, va_list args) {
  char buf[1024];
  int n = std::vsnprintf(buf, sizeof(buf), fmt, args);
  std::string_view s(
      buf, n > 0 ? std::min<std::size_t>(static_cast<std::size_t>(n), sizeof(buf) - 1) : 0);
  while (!s.empty() && s.back() == '\n') s.remove_suffix(1);
  // libbpf's warnings repeat the verifier log we already summarize: keep them at debug.
  if (level == LIBBPF_WARN)
    spdlog::debug("libbpf: {}", s);
  else
    spdlog::trace("libbpf: {}", s);
  return n;
}

std::string tail(const char* log, std::size_t max_lines) {
  std::vector<std::string> lines;
  std::istringstream in(log);
  for (std::string line; std::getline(in, line);)
    if (!line.empty()) lines.push_back(line);
  std::size_t start = lines.size() > max_lines ? lines.size() - max_lines : 0;
  std::string out;
  if (start > 0) out += fmt::format("  ... ({} earlier lines)\n", start);
  for (std::size_t i = start; i < lines.size(); ++i) out += "  " + lines[i] + "\n";
  return out;
}

}  // namespace

void install_libbpf_logging() {
  static std::once_flag once;
  std::call_once(once, [] { libbpf_set_print(libbpf_print); });
}

Status load_with_verifier_log(bpf_object* obj, std::size_t tail_lines) {
  install_libbpf_logging();
  constexpr std::size_t kLogSize = 1 << 20;
  struct Buf {
    bpf_program* prog;
    std::unique_ptr<char[]> data;
  };
  std::vector<Buf> bufs;
  bpf_program* prog = nullptr;
  bpf_object__for_each_program(prog, obj) {
    if (!bpf_program__autoload(prog)) continue;
    Buf b{prog, std::make_unique<char[]>(kLogSize)};
    b.data[0] = '\0';
    // With log level 0 libbpf retries a failed load with level 1 into this buffer, so
    // a successful load pays nothing for the capture.
    bpf_program__set_log_buf(prog, b.data.get(), kLogSize);
    bufs.push_back(std::move(b));
  }
  int err = bpf_object__load(obj);
  std::string report;
  if (err) {
    for (auto& b : bufs) {
      if (bpf_program__fd(b.prog) >= 0 || b.data[0] == '\0') continue;
      report +=
          fmt::format("program '{}' ({}) rejected by the verifier:\n{}", bpf_program__name(b.prog),
                      bpf_program__section_name(b.prog), tail(b.data.get(), tail_lines));
    }
    if (report.empty()) report = fmt::format("bpf_object__load failed: {}", std::strerror(-err));
  }
  for (auto& b : bufs) bpf_program__set_log_buf(b.prog, nullptr, 0);
  if (report.empty()) return {};
  return make_error(std::move(report));
}

namespace {

// Before 6.6 the kernel does not name a perf-event link's target (tracepoint, uprobe,
// kprobe). The plugin's own label for the attachment does, in the forms the bundled
// plugins use: "tracepoint:CAT:NAME[:role]", "uprobe:PATH:FUNC[:role]",
// "kprobe:FUNC[:role]", or "CAT:NAME" for a tracepoint program. Anything else stays
// unnamed, as before.
// A tracepoint program attached by its section ("tracepoint/CAT/NAME" or "tp/CAT/NAME")
// names its own target.
std::string target_from_section(bpf_program* prog) {
  if (!prog || bpf_program__type(prog) != BPF_PROG_TYPE_TRACEPOINT) return {};
  const std::string sec = bpf_program__section_name(prog);
  if (std::count(sec.begin(), sec.end(), '/') != 2) return {};
  if (!sec.starts_with("tracepoint/") && !sec.starts_with("tp/")) return {};
  return "tracepoint:" + sec.substr(sec.rfind('/') + 1);
}

std::string target_from_label(std::string label, bpf_program* prog) {
  const bool exit_side = label.ends_with(":exit") || label.ends_with(":return");
  for (const char* role : {":entry", ":exit", ":return"})
    if (label.size() > std::strlen(role) && label.ends_with(role))
      label.resize(label.size() - std::strlen(role));
  auto after_last_colon = [](const std::string& s) { return s.substr(s.rfind(':') + 1); };
  if (label.starts_with("tracepoint:") && std::count(label.begin(), label.end(), ':') == 2)
    return "tracepoint:" + after_last_colon(label);
  if (label.starts_with("uprobe:") && std::count(label.begin(), label.end(), ':') >= 2) {
    // "uprobe:PATH:FUNC" → the kernel's own form, "uprobe:PATH+0xOFF" (uretprobe for the
    // exit side), so every consumer reads one spelling whatever the kernel.
    const std::string path = label.substr(7, label.rfind(':') - 7);
    try {
      const auto fn = sdk::find_elf_function(path, after_last_colon(label));
      return fmt::format("{}:{}+{:#x}", exit_side ? "uretprobe" : "uprobe", path, fn.file_offset);
    } catch (const std::exception&) {
      return {};
    }
  }
  if (label.starts_with("kprobe:") || label.starts_with("kretprobe:")) return label;
  // A tracepoint program labelled "CAT:NAME" or just "NAME" (what plugins that attach by
  // category and name pass).
  if (prog && bpf_program__type(prog) == BPF_PROG_TYPE_TRACEPOINT &&
      std::count(label.begin(), label.end(), ':') <= 1 && !label.empty())
    return "tracepoint:" + after_last_colon(label);
  return {};
}

}  // namespace

void LinkSet::add(const std::string& instance, const std::string& probe, bpf_program* prog,
                  bpf_link* link, int err, const std::string& hint) {
  std::lock_guard lock(mu_);
  ProbeResult r{instance, probe, prog ? bpf_program__name(prog) : "", link != nullptr, ""};
  if (!link) r.error = err ? std::strerror(err < 0 ? -err : err) : "attach failed";
  if (link) {
    links_.push_back(link);
    int fd = prog ? bpf_program__fd(prog) : -1;
    std::string target = ProbeStats::link_target(bpf_link__fd(link));
    if (target.empty()) target = hint;
    if (target.empty()) target = target_from_section(prog);
    if (target.empty()) target = target_from_label(probe, prog);
    attached_.push_back(
        {instance, probe, r.program, target, fd >= 0 ? fcntl(fd, F_DUPFD_CLOEXEC, 0) : -1});
  }
  results_.push_back(std::move(r));
}

std::vector<ProgramStats> LinkSet::program_stats() const {
  std::lock_guard lock(mu_);
  std::vector<ProgramStats> out;
  for (const auto& a : attached_) {
    ProgramStats s{a.instance, a.probe, a.program, a.target};
    if (ProbeStats::read(a.prog_fd, s)) out.push_back(std::move(s));
  }
  return out;
}

void LinkSet::detach_all() {
  std::lock_guard lock(mu_);
  // In the order they were attached. A pair's plugin attaches first the half that may fire
  // alone (latency, memalloc: the exit), so detaching that half first too leaves the calls
  // a running target makes meanwhile (each detach waits for a grace period) as entries in
  // flight at the end, instead of exits without their entry, which read as lost entries.
  for (bpf_link* link : links_) bpf_link__destroy(link);
  links_.clear();
  for (auto& a : attached_)
    if (a.prog_fd >= 0) close(a.prog_fd);
  attached_.clear();
}

std::vector<ProbeResult> LinkSet::results() const {
  std::lock_guard lock(mu_);
  return results_;
}

std::size_t LinkSet::attached_count(const std::string& instance) const {
  std::lock_guard lock(mu_);
  return static_cast<std::size_t>(
      std::count_if(results_.begin(), results_.end(),
                    [&](const ProbeResult& r) { return r.instance == instance && r.attached; }));
}

}  // namespace loupe
