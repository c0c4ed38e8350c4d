// SPDX-License-Identifier: Apache-2.0
#include "python/python_frames.hpp"

#include <bpf/bpf.h>
#include <spdlog/spdlog.h>

#include <fmt/format.h>

#include <algorithm>

#include "session/health_report.hpp"

namespace loupe {
namespace {

// glibc 2.x's thread descriptor keeps the values of the first 32 pthread keys in
// specific_1stblock, at fsbase + 0x310, 16 bytes a key, the value at +8 (what
// pthread_getspecific reads for a key below 32).
constexpr std::uint32_t kGlibcTsdOffset = 0x318;

std::uint16_t u16(std::uint32_t v) {
  return v == UINT32_MAX ? 0xffff : static_cast<std::uint16_t>(v);
}

// What the walk needs of one interpreter process, from its version's layout.
loupe_python_proc bpf_entry(const PythonProcess& p) {
  const PythonLayout& l = *p.runtime.layout;
  loupe_python_proc e{};
  e.tss_key_addr = p.tss_key_addr();
  const auto eval = p.eval();
  for (std::size_t i = 0; i < eval.size() && i < 2; ++i) {
    e.eval_start[i] = eval[i].start;
    e.eval_end[i] = eval[i].end;
  }
  e.tsd_offset = kGlibcTsdOffset;
  e.tstate_frame = u16(l.tstate_frame);
  e.cframe_current = u16(l.cframe_current);
  e.frame_code = u16(l.frame_code);
  e.frame_previous = u16(l.frame_previous);
  e.frame_instr = u16(l.frame_instr);
  e.frame_entry = u16(l.frame_entry);
  e.code_adaptive = u16(l.code_adaptive);
  e.code_first = u16(l.code_firstlineno);
  e.code_name = u16(l.code_qualname ? l.code_qualname : l.code_name);
  e.entry_kind = l.minor <= 10   ? LOUPE_PYTHON_ENTRY_ONE
                 : l.minor == 11 ? LOUPE_PYTHON_ENTRY_FLAG
                                 : LOUPE_PYTHON_ENTRY_SHIM;
  return e;
}

}  // namespace

PythonFrames::~PythonFrames() {
  for (auto& c : consumers_) ring_buffer__free(c.ring);
}

std::vector<RuntimeMapSpec> PythonFrames::maps() const {
  return {{"loupe_python_procs", BPF_MAP_TYPE_HASH, 4, sizeof(loupe_python_proc), 1024,
           BPF_F_NO_PREALLOC}};
}

Status PythonFrames::attach(const std::map<std::string, int>& fds) {
  auto procs = fds.find("loupe_python_procs");
  auto codes = fds.find("loupe_runtime_seen");
  if (procs == fds.end() || codes == fds.end()) return make_error("no loupe_python_procs map");
  // The session's ring is read by the session's unwinder, which hands each sighting here.
  consumers_.push_back({procs->second, codes->second, nullptr});
  return {};
}

Runtime::Update PythonFrames::update(std::uint32_t pid, const std::vector<MapsEntry>& maps) {
  return update_entry(pid, maps) ? Update::kYes : Update::kNo;
}

std::uint32_t PythonFrames::name(std::uint32_t pid, std::uint64_t frame,
                                 Symbolizer::RuntimeName* out, std::uint32_t max) {
  Name n;
  if (max == 0 || !name_frame(pid, frame, &n)) return 0;
  out->address = LOUPE_PYTHON_CODE(frame);
  out->function = std::move(n.qualname);
  out->file = std::move(n.file);
  out->line = n.line;
  out->kind = LOUPE_FRAME_PYTHON;
  out->resolution = LOUPE_RESOLVED_PYTHON;
  return 1;
}

bool PythonFrames::update_entry(std::uint32_t pid, const std::vector<MapsEntry>& maps) {
  if (consumers_.empty()) return false;
  auto found = find_python_process(proc_root_, pid, maps, &runtimes_);
  if (!found || !found->runtime.layout) {
    // Said once per build: the version, the file, and why when the version has a layout
    // this build does not fit (3.13+: its _Py_DebugOffsets).
    const std::string why = found && !found->runtime.unsupported.empty()
                                ? ", " + found->runtime.unsupported
                                : std::string();
    if (found &&
        unsupported_
            .insert("CPython " + found->runtime.version() + " (" + found->runtime.path + why + ")")
            .second)
      spdlog::warn(
          "pid {} runs CPython {} ({}{}), which loupe has no layout for: its stacks keep "
          "their native frames only",
          pid, found->runtime.version(), found->runtime.path, why);
    forget(pid);
    return false;
  }
  const loupe_python_proc entry = bpf_entry(*found);
  for (auto& c : consumers_)
    if (bpf_map_update_elem(c.procs_fd, &pid, &entry, BPF_ANY) != 0) {
      std::lock_guard lock(mu_);
      ++write_errors_;
      return false;
    }
  // A process that exec'd another program: the code objects of the one before are not its.
  bool added = false;
  {
    std::lock_guard lock(mu_);
    added = processes_.insert_or_assign(pid, found->runtime.layout).second;
  }
  if (added) {
    ++processes_seen_;
    spdlog::debug("pid {}: CPython {} ({}), Python frames on", pid, found->runtime.version(),
                  found->runtime.path);
  }
  return true;
}

void PythonFrames::forget(std::uint32_t pid) {
  {
    std::lock_guard lock(mu_);
    if (!processes_.erase(pid)) return;
  }
  for (auto& c : consumers_) bpf_map_delete_elem(c.procs_fd, &pid);
}

void PythonFrames::poll() {
  std::lock_guard lock(ring_mu_);
  for (auto& c : consumers_)
    if (c.ring) ring_buffer__consume(c.ring);
}

// Reads code object `code` of `pid` from the process and keeps it; `lock` (on mu_) is let
// go for the read. nullptr when the process is not walked, the bound is reached (counted
// in codes_dropped_: those frames keep the code object's address) or the read failed
// (codes_failed_: the process was gone).
const PythonFrames::Code* PythonFrames::read_and_keep(std::unique_lock<std::mutex>& lock,
                                                      std::uint32_t pid, std::uint64_t code,
                                                      std::uint64_t token) {
  auto p = processes_.find(pid);
  if (p == processes_.end()) return nullptr;
  const PythonLayout* layout = p->second;
  if (codes_.size() >= kMaxCodes && !codes_.count({pid, code})) {
    ++codes_dropped_;
    return nullptr;
  }
  lock.unlock();
  auto read = read_python_code(static_cast<int>(pid), code, *layout);
  lock.lock();
  if (!read) {
    ++codes_failed_;
    spdlog::debug("pid {}: code object {:#x}: {}", pid, code, read.error());
    return nullptr;
  }
  return &codes_.insert_or_assign({pid, code}, Code{std::move(read).value(), layout, token})
              .first->second;
}

// Read now, while the process lives: most are gone by the time their stacks are named.
void PythonFrames::seen(std::uint32_t pid, std::uint64_t code, std::uint64_t token) {
  std::unique_lock lock(mu_);
  // Told again after the kernel's LRU evicted it: the same object. Another token: another
  // code object now lives at that address; its name replaces the first's. (Token 0: read by
  // name() before the ring told it; the ring's record brings the token.)
  if (auto it = codes_.find({pid, code}); it != codes_.end() && it->second.token == token) return;
  read_and_keep(lock, pid, code, token);
}

bool PythonFrames::name_frame(std::uint32_t pid, std::uint64_t frame, Name* out) {
  const std::uint64_t code = LOUPE_PYTHON_CODE(frame);
  // A stack is named as soon as a plugin first sees it (cpusample every 250 ms, lockwait
  // and offcpu at once), often before the session's tick reads the ring: the sightings that
  // came before the stack are read first. Without this, a busy 6.1 guest named 539 of 880
  // samples in 3.13's heavy() "<module>": a site module's body, freed, had held its address.
  poll();
  std::unique_lock lock(mu_);
  const Code* c = nullptr;
  if (auto it = codes_.find({pid, code}); it != codes_.end()) c = &it->second;
  // Told by a walk but not read yet: the ring is read at the session's tick, and a plugin
  // that names a stack as soon as it first sees it (lockwait, offcpu) comes earlier. Read
  // it now, while the process lives; its token comes with the ring's record.
  if (!c && !(c = read_and_keep(lock, pid, code, 0))) {
    ++names_missed_;
    return false;
  }
  out->qualname = c->code.qualname;
  out->file = c->code.filename;
  out->line =
      python_line(c->code, static_cast<std::uint32_t>(LOUPE_PYTHON_INDEX(frame)), *c->layout);
  return true;
}

PythonFrames::Counters PythonFrames::counters() const {
  Counters c;
  c.processes = processes_seen_;
  c.unsupported.assign(unsupported_.begin(), unsupported_.end());
  std::lock_guard lock(mu_);
  c.codes_read = codes_.size();
  for (const auto& [key, code] : codes_)
    c.code_bytes += sizeof(key) + sizeof(code) + code.code.qualname.capacity() +
                    code.code.filename.capacity() + code.code.linetable.capacity();
  c.codes_failed = codes_failed_;
  c.codes_dropped = codes_dropped_;
  c.names_missed = names_missed_;
  c.write_errors = write_errors_;
  return c;
}

void PythonFrames::report_health(HealthReport& health) const {
  if (!attached()) return;
  const Counters c = counters();
  const auto warn_if = [](std::uint64_t v) { return v ? LOUPE_HEALTH_WARN : LOUPE_HEALTH_OK; };
  const std::string comp = "python_frames";
  health.health("python_processes", comp, c.processes, LOUPE_HEALTH_OK,
                fmt::format("CPython processes whose Python frames were walked; {} code object(s) "
                            "named ({:.1f} KiB)",
                            c.codes_read, static_cast<double>(c.code_bytes) / 1024.0),
                true);
  health.health(
      "python_codes_unread", comp, c.codes_failed, warn_if(c.codes_failed),
      c.codes_failed ? "code objects the stacks met that could not be read (their process "
                       "exited first): those frames keep the code object's address"
                     : "",
      true, {c.codes_read + c.codes_failed, "code objects", LOUPE_HEALTH_EFFECT_DEGRADED});
  health.health("python_frames_unnamed", comp, c.names_missed, warn_if(c.names_missed),
                c.names_missed
                    ? "Python frames named by their code object's address only: it could "
                      "not be read (its process exited before the frame was first named)"
                    : "",
                true, {0, nullptr, LOUPE_HEALTH_EFFECT_DEGRADED});
  health.health("python_codes_dropped", comp, c.codes_dropped, warn_if(c.codes_dropped),
                c.codes_dropped ? "code objects not named: the session keeps the names of 262144, "
                                  "and more were seen; those frames keep the code object's address"
                                : "",
                true,
                {c.codes_read + c.codes_dropped, "code objects", LOUPE_HEALTH_EFFECT_DEGRADED});
  health.health("python_entries_refused", comp, c.write_errors, warn_if(c.write_errors),
                c.write_errors
                    ? "interpreters the kernel's map refused (it holds 1024): their stacks "
                      "keep native frames only"
                    : "",
                true);
  std::string versions;
  for (const auto& v : c.unsupported) versions += (versions.empty() ? "" : ", ") + v;
  health.health("python_unsupported", comp, c.unsupported.size(), warn_if(c.unsupported.size()),
                c.unsupported.empty()
                    ? ""
                    : "interpreters loupe has no layout for (3.10 to 3.13 have one): " + versions +
                          "; their stacks keep native frames only",
                true);
}

}  // namespace loupe
