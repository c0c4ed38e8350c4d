// SPDX-License-Identifier: Apache-2.0
//
// The symbolization service: kernel frames through kallsyms, user frames through the
// process's mappings and the ELF files behind them, JIT frames through perf maps and
// jitdump files. One
// lock guards all caches: a hit is a hash lookup and two binary searches under it.
#include "loupe/symbolizer.hpp"

#include <cxxabi.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <list>
#include <mutex>
#include <optional>
#include <unordered_map>

#include "loupe/unwind.h"
#include "symbols/debuginfod_fetcher.hpp"
#include "symbols/elf_file_cache.hpp"
#include "symbols/kallsyms_table.hpp"
#include "symbols/mapping_events.hpp"
#include "symbols/process_space.hpp"
#include "symbols/string_pool.hpp"

namespace loupe {
namespace {

// Bound of the per-file cache of source-line answers (cleared whole when full).
constexpr std::size_t kMaxSourceAnswersPerFile = 4096;

class ElfSymbolizer final : public Symbolizer {
 public:
  explicit ElfSymbolizer(const SymbolizerOptions& opts)
      : opts_(opts),
        max_processes_(opts.max_cached_processes == 0 ? 1 : opts.max_cached_processes),
        files_(opts.max_cached_files, opts.debug_root) {
    fetcher_ = DebuginfodFetcher::start(opts.debuginfod_urls,
                                        std::chrono::milliseconds(opts.debuginfod_timeout_ms));
    if (fetcher_)
      files_.set_debug_lookup(
          [f = fetcher_.get()](const std::string& id) { return f->path_for(id); });
  }

  void symbolize(std::uint32_t pid, loupe_frame_kind kind, const std::uint64_t* addrs,
                 std::uint32_t n, loupe_frame* out) override {
    std::lock_guard lock(mu_);
    if (kind == LOUPE_FRAME_KERNEL) {
      for (std::uint32_t i = 0; i < n; ++i) kernel_frame(text_syms(), addrs[i], &out[i]);
      return;
    }
    ProcessSpace* space = process(pid);
    ++call_;
    for (std::uint32_t i = 0; i < n; ++i) {
      if (LOUPE_RUNTIME_IS_FRAME(addrs[i]))
        runtime_frames(pid, addrs[i], &out[i], 1);
      else
        user_frame(space, kind, addrs[i], &out[i]);
    }
  }

  void symbolize_stack(std::uint32_t pid, loupe_frame_kind kind, const std::uint64_t* addrs,
                       std::uint32_t n, std::vector<loupe_frame>* out) override {
    std::lock_guard lock(mu_);
    out->clear();
    out->reserve(n);
    if (kind == LOUPE_FRAME_KERNEL) {
      out->resize(n);
      for (std::uint32_t i = 0; i < n; ++i) kernel_frame(text_syms(), addrs[i], &(*out)[i]);
      return;
    }
    ProcessSpace* space = process(pid);
    ++call_;
    loupe_frame many[kMaxInlined];
    for (std::uint32_t i = 0; i < n; ++i) {
      if (LOUPE_RUNTIME_IS_FRAME(addrs[i])) {
        const std::uint32_t k = runtime_frames(pid, addrs[i], many, kMaxInlined);
        out->insert(out->end(), many, many + k);
      } else {
        out->emplace_back();
        user_frame(space, kind, addrs[i], &out->back());
      }
    }
  }

  void name_runtime_frames(RuntimeNamer namer) override {
    std::lock_guard lock(mu_);
    runtime_namer_ = std::move(namer);
  }

  void symbolize_data(std::uint32_t pid, std::uint64_t addr, loupe_frame* out) override {
    std::lock_guard lock(mu_);
    if (pid == 0) {
      kernel_frame(data_syms(), addr, out);
      return;
    }
    *out = unresolved(addr, LOUPE_FRAME_USER, LOUPE_UNRESOLVED_PROCESS_GONE);
    ProcessSpace* space = process(pid);
    if (!space) return;
    MappedRegion* r = space->find_data(addr);
    if (!r && maybe_reload(*space)) r = space->find_data(addr);
    if (!r) {
      out->resolution = LOUPE_UNRESOLVED_NO_MODULE;
      return;
    }
    resolve_in_region(*space, *r, addr, /*data=*/true, out);
  }

  UserUnwind unwind_user(std::uint32_t pid, const loupe_user_regs& regs, const void* stack,
                         std::uint32_t stack_len, std::uint64_t* out, std::uint32_t max) override {
    std::lock_guard lock(mu_);
    ++unwinds_;
    ProcessSpace* space = process(pid);
    if (!space) return {0, LOUPE_UNWIND_NO_PROCESS};
    if (!space->unwinder) space->unwinder = std::make_unique<DwarfUnwinder>(pid);
    DwarfUnwinder& u = *space->unwinder;
    if (u.synced_generation() != space->generation()) u.sync_modules(*space, files_);
    // A pc no reported file covers may be code mapped since (dlopen): re-read, rate-limited.
    const std::uint64_t pc = regs.regs[16];
    if (!u.covers(pc) && maybe_reload(*space)) u.sync_modules(*space, files_);
    UnwindResult r = u.unwind(regs, stack, stack_len, out, max);
    return {r.n, r.status};
  }

  void follow_mappings(std::unique_ptr<MappingEvents> events) override {
    std::lock_guard lock(mu_);
    mappings_ = std::move(events);
  }

  void pump() override {
    // Held: a lookup is running, and drains the records itself at its next process().
    // The session's loop does not wait for it (a plugin naming a batch of new stacks held
    // it a second in an emulated guest, and the loop's other work waited behind).
    std::unique_lock lock(mu_, std::try_to_lock);
    if (lock.owns_lock()) drain_mappings();
  }

  void read_maps_from(ProcessWatch* watch) override {
    std::lock_guard lock(mu_);
    watch_ = watch ? watch : &own_watch_;
  }

  void on_code_mapping(std::function<void(const CodeMapping&)> listener) override {
    std::lock_guard lock(mu_);
    code_listener_ = std::move(listener);
  }

  // Marks the space for a re-read rather than dropping it: a caller that saw the maps
  // change may be racing the process's exit, and a dropped space could never be read
  // again (a warm pass dropped perl's just as it exited: every frame of its stacks lost).
  void invalidate(std::uint32_t pid) override {
    std::lock_guard lock(mu_);
    if (auto it = index_.find(pid); it != index_.end()) it->second->stale = true;
  }

  void forget(std::uint32_t pid) override {
    std::lock_guard lock(mu_);
    auto it = index_.find(pid);
    if (it == index_.end()) return;
    lru_.erase(it->second);
    index_.erase(it);
  }

  std::uint32_t source_lines(std::uint32_t pid, std::uint64_t addr, SourceLocation* out,
                             std::uint32_t max) override {
    std::lock_guard lock(mu_);
    ProcessSpace* space = process(pid);
    if (!space || max == 0) return 0;
    MappedRegion* r = space->find(addr);
    if (!r || !r->map.file_backed() || !space->ensure_elf(*r, files_)) return 0;
    ElfSymbolTable::LazyDwarf& dwarf = r->elf->dwarf();
    if (!dwarf.tried) {
      dwarf.tried = true;
      int fd = space->open_file(*r);
      if (fd >= 0) dwarf.lines = ElfDwarfLines::open(fd, r->elf->build_id(), opts_.debug_root);
    }
    if (!dwarf.lines) return 0;
    std::uint64_t vaddr = addr - *r->bias;
    auto it = dwarf.answers.find(vaddr);
    if (it == dwarf.answers.end()) {
      if (dwarf.answers.size() >= kMaxSourceAnswersPerFile) dwarf.answers.clear();
      std::vector<SourceLocation> locs;
      for (const DwarfSourceFrame& f : dwarf.lines->lookup(vaddr))
        locs.push_back({f.function.empty() ? nullptr : strings_.intern(f.function),
                        f.file.empty() ? nullptr : strings_.intern(f.file), f.line, f.inlined});
      it = dwarf.answers.emplace(vaddr, std::move(locs)).first;
    }
    auto n = static_cast<std::uint32_t>(std::min<std::size_t>(max, it->second.size()));
    std::copy_n(it->second.begin(), n, out);
    return n;
  }

  SymbolizerStats stats() const override {
    std::lock_guard lock(mu_);
    SymbolizerStats s;
    s.maps_reads = maps_reads_;
    s.elf_loads = files_.loads();
    s.cached_processes = lru_.size();
    s.evicted_exited = evicted_exited_;
    s.cached_files = files_.size();
    s.interned_strings = strings_.size();
    s.kernel_symbols = text_ ? text_->size() : 0;
    s.unwinds = unwinds_;
    if (fetcher_) {
      auto d = fetcher_->counters();
      s.debuginfod = true;
      s.debuginfod_requested = d.requested;
      s.debuginfod_fetched = d.fetched;
      s.debuginfod_not_found = d.not_found;
      s.debuginfod_timed_out = d.timed_out;
      s.debuginfod_failed = d.failed + d.dropped;
    }
    if (mappings_) {
      MappingEvents::Counters c = mappings_->counters();
      s.mapping_records = c.records;
      s.mapping_records_lost = c.lost;
      s.mapping_tasks = c.tasks;
      s.mapping_tasks_missed = c.tasks_missed;
    }
    for (const ProcessSpace& p : lru_) {
      if (p.unwinder) {
        ++s.unwinders;
        s.unwind_modules += p.unwinder->modules();
      }
      if (const JitDump* d = p.jitdump_if_any()) {
        s.jitdump_entries += d->size();
        s.jitdump_evictions += d->evictions();
      }
    }
    return s;
  }

 private:
  static loupe_frame unresolved(std::uint64_t addr, std::uint32_t kind,
                                loupe_frame_resolution why) {
    return loupe_frame{addr, nullptr, nullptr, addr, kind, static_cast<std::uint32_t>(why)};
  }

  // kallsyms is large (~120k lines): read on the first kernel frame, not at construction.
  const KallsymsTable& text_syms() {
    if (!text_) text_.emplace(opts_.kallsyms_path, KallsymsTable::Kind::kText);
    return *text_;
  }
  const KallsymsTable& data_syms() {
    if (!data_) data_.emplace(opts_.kallsyms_path, KallsymsTable::Kind::kData);
    return *data_;
  }

  void kernel_frame(const KallsymsTable& table, std::uint64_t addr, loupe_frame* out) {
    *out = unresolved(addr, LOUPE_FRAME_KERNEL, LOUPE_UNRESOLVED_NO_MODULE);
    if (table.size() == 0) {
      // kptr_restrict hides the addresses: the frame is kernel code we cannot name.
      out->module = strings_.intern("[kernel]");
      out->resolution = LOUPE_UNRESOLVED_NO_SYMBOL;
      return;
    }
    bool in_kernel = false;
    KernelSymbol sym = table.lookup(addr, &in_kernel);
    if (!in_kernel) return;
    out->symbol = sym.name;
    out->module = sym.module;
    out->offset = sym.offset;
    out->resolution = LOUPE_RESOLVED_KALLSYMS;
  }

  // The cached address space of `pid`, read on first use; nullptr when the process is gone
  // and was never seen (a process seen before, or known from the kernel's mmap records,
  // stays resolvable after it exits).
  ProcessSpace* process(std::uint32_t pid) {
    drain_mappings();
    adopt_fetched_debug();
    return cached_or_read(pid);
  }

  // Debug files debuginfod delivered since the last lookup: the modules they belong to
  // are read again (with the file's .symtab) on their next use.
  void adopt_fetched_debug() {
    if (!fetcher_) return;
    for (const std::string& id : fetcher_->take_ready()) {
      files_.forget_build_id(id);
      for (ProcessSpace& p : lru_)
        for (MappedRegion& r : p.regions())
          if (r.elf && r.elf->build_id() == id) {
            r.elf.reset();
            r.bias.reset();
            r.elf_tried = false;
          }
    }
  }

  // The kernel's records, applied in the order they happened. A process first met in them
  // (forked, or exec'd, while the session ran) is built from them alone: its maps may be
  // gone before anyone could read them.
  void drain_mappings() {
    if (!mappings_ || draining_) return;
    draining_ = true;
    mappings_->drain([&](const MappingEvent& e) {
      switch (e.kind) {
        case MappingEvent::Kind::kFork: {
          // One drain reads the CPUs' buffers one after the other: a child's first records
          // can come a drain before its fork's, and must not be overwritten by it.
          if (auto it = index_.find(e.pid); it != index_.end() && it->second->exec_ns > e.time_ns)
            break;
          // The pid may have been another process's: what was cached under it goes.
          ProcessSpace* parent = cached_or_read(e.parent);
          ProcessSpace child(e.pid, opts_.proc_root, opts_.perf_map_dir);
          if (parent) child.inherit_from(*parent);
          child.exec_ns = e.time_ns;
          insert(std::move(child));
          break;
        }
        case MappingEvent::Kind::kExec: {
          ProcessSpace& space = recorded(e.pid);
          space.apply_exec();
          space.exec_ns = e.time_ns;
          break;
        }
        case MappingEvent::Kind::kMap: {
          ProcessSpace& space = recorded(e.pid);
          // The same skew: the old image's last mapping must not land in the new image.
          if (e.time_ns >= space.exec_ns) space.apply_map(e.map, strings_, files_);
          if (code_listener_ && e.map.executable && e.map.file_backed() && !e.map.deleted)
            code_listener_({e.pid, e.map.path, e.map.dev_major, e.map.dev_minor, e.map.inode});
          break;
        }
        case MappingEvent::Kind::kExit:
          break;  // its space stays: its stacks are symbolized after it is gone
      }
    });
    draining_ = false;
  }

  // The space a record applies to: cached, else read from /proc (a process that predates
  // the session: its earlier mappings were never recorded), else empty.
  ProcessSpace& recorded(std::uint32_t pid) {
    if (ProcessSpace* s = cached_or_read(pid)) return *s;
    return insert(ProcessSpace(pid, opts_.proc_root, opts_.perf_map_dir));
  }

  ProcessSpace& insert(ProcessSpace&& space) {
    const std::uint32_t pid = space.pid();
    if (auto it = index_.find(pid); it != index_.end()) {
      lru_.erase(it->second);
      index_.erase(it);
    }
    lru_.push_front(std::move(space));
    index_[pid] = lru_.begin();
    while (lru_.size() > max_processes_) {
      const std::uint32_t old = lru_.back().pid();
      // A live one is read again when next asked for; an exited one is lost.
      const std::string dir = opts_.proc_root + "/" + std::to_string(old);
      if (::access(dir.c_str(), F_OK) != 0) ++evicted_exited_;
      index_.erase(old);
      lru_.pop_back();
    }
    return lru_.front();
  }

  ProcessSpace* cached_or_read(std::uint32_t pid) {
    if (auto it = index_.find(pid); it != index_.end()) {
      lru_.splice(lru_.begin(), lru_, it->second);
      ProcessSpace& space = *it->second;
      // A profiled command is seen between fork and exec (loupe's own image) and after:
      // an exec replaces the image, so the cached regions are dropped at once, not when
      // the rate-limited reload on a miss comes round.
      // One stat of /proc/PID/exe per maps re-read interval, not per call: symbolize() is
      // on the path of every event with a stack.
      const auto now = std::chrono::steady_clock::now();
      bool reread = space.stale;
      space.stale = false;
      if (now - space.exec_checked_at >= std::chrono::milliseconds(opts_.maps_reread_interval_ms)) {
        space.exec_checked_at = now;
        reread = reread || space.exec_since_reload();
      }
      if (reread) {
        int err = 0;
        ++maps_reads_;
        // A failed re-read (the process is gone) leaves the space as it was.
        if (space.reload(*watch_, true, strings_, files_, &err)) space.unwinder.reset();  // old CFI
      }
      return &space;
    }
    if (pid == 0) return nullptr;
    ProcessSpace space(pid, opts_.proc_root, opts_.perf_map_dir);
    int err = 0;
    ++maps_reads_;
    if (!space.reload(*watch_, false, strings_, files_, &err)) return nullptr;
    return &insert(std::move(space));
  }

  // A miss may mean the mappings changed (dlopen, new JIT region); re-read, rate-limited.
  bool maybe_reload(ProcessSpace& space) {
    auto now = std::chrono::steady_clock::now();
    if (now - space.loaded_at() < std::chrono::milliseconds(opts_.maps_reread_interval_ms))
      return false;
    int err = 0;
    ++maps_reads_;
    return space.reload(*watch_, false, strings_, files_, &err);
  }

  // A runtime's frame: the functions it names (innermost first, at most `max`), as the
  // session's runtimes read them. One they could not read (the process was gone first)
  // is one frame that keeps the tagged value, named by its runtime's kind.
  static constexpr std::uint32_t kMaxInlined = 64;
  std::uint32_t runtime_frames(std::uint32_t pid, std::uint64_t frame, loupe_frame* out,
                               std::uint32_t max) {
    RuntimeName names[kMaxInlined];
    const std::uint32_t n =
        runtime_namer_ ? runtime_namer_(pid, frame, names, std::min(max, kMaxInlined)) : 0;
    if (n == 0) {
      *out = unresolved(frame, LOUPE_FRAME_USER, LOUPE_UNRESOLVED_PROCESS_GONE);
      return 1;
    }
    for (std::uint32_t i = 0; i < n; ++i) {
      out[i] = unresolved(names[i].address ? names[i].address : frame, names[i].kind,
                          names[i].resolution);
      if (!names[i].function.empty()) out[i].symbol = strings_.intern(names[i].function);
      if (!names[i].file.empty()) out[i].module = strings_.intern(names[i].file);
      out[i].offset = names[i].line;
    }
    return n;
  }

  void user_frame(ProcessSpace* space, loupe_frame_kind kind, std::uint64_t addr,
                  loupe_frame* out) {
    *out = unresolved(addr, kind, LOUPE_UNRESOLVED_PROCESS_GONE);
    if (!space) return;
    MappedRegion* r = space->find(addr);
    if (!r && maybe_reload(*space)) r = space->find(addr);
    // JIT code lives in anonymous executable memory, outside any file.
    if ((!r || !r->map.file_backed()) &&
        (perf_map_frame(*space, addr, out) || jitdump_frame(*space, addr, out)))
      return;
    if (!r) {
      out->resolution = LOUPE_UNRESOLVED_NO_MODULE;
      return;
    }
    resolve_in_region(*space, *r, addr, /*data=*/false, out);
  }

  bool perf_map_frame(ProcessSpace& space, std::uint64_t addr, loupe_frame* out) {
    PerfMap& map = space.perf_map();
    // One stat per stack, not per frame: a JIT stack is mostly JIT frames.
    if (space.perf_map_checked_call != call_) {
      space.perf_map_checked_call = call_;
      space.perf_map_present = map.refresh();
      if (space.perf_map_present && !space.perf_map_module)
        space.perf_map_module = strings_.intern(map.name());
    }
    PerfMap::Hit hit;
    if (!space.perf_map_present || !map.lookup(addr, &hit)) return false;
    if (!*hit.interned) *hit.interned = strings_.intern(hit.name);
    out->symbol = *hit.interned;
    out->module = space.perf_map_module;
    out->offset = hit.offset;
    out->kind = LOUPE_FRAME_JIT;
    out->resolution = LOUPE_RESOLVED_PERF_MAP;
    return true;
  }

  bool jitdump_frame(ProcessSpace& space, std::uint64_t addr, loupe_frame* out) {
    // As for perf maps: one stat per stack, and a read only of what was appended.
    if (space.jitdump_checked_call != call_) {
      space.jitdump_checked_call = call_;
      space.jitdump_present = space.jitdump().refresh();
      if (space.jitdump_present && !space.jitdump_module)
        space.jitdump_module = strings_.intern(space.jitdump_name());
    }
    const JitDump* dump = space.jitdump_if_any();
    JitDump::Hit hit;
    if (!space.jitdump_present || !dump || !dump->lookup(addr, &hit)) return false;
    if (!*hit.interned) *hit.interned = strings_.intern(hit.name);
    out->symbol = *hit.interned;
    out->module = space.jitdump_module;
    out->offset = hit.offset;
    out->kind = LOUPE_FRAME_JIT;
    out->resolution = LOUPE_RESOLVED_JITDUMP;
    return true;
  }

  void resolve_in_region(ProcessSpace& space, MappedRegion& r, std::uint64_t addr, bool data,
                         loupe_frame* out) {
    out->module = r.module;
    out->resolution = LOUPE_UNRESOLVED_NO_SYMBOL;
    out->offset = addr - r.map.start + r.map.offset;  // file offset until the ELF says more
    if (!r.map.file_backed() || !space.ensure_elf(r, files_)) return;
    if (fetcher_ && !r.debuginfo_asked && !r.elf->has_symtab()) {
      r.debuginfo_asked = true;
      fetcher_->want(r.elf->build_id());
    }
    std::uint64_t vaddr = addr - *r.bias;
    // Unresolved frames carry the link-time address: `addr2line -e module 0xoffset` works.
    out->offset = vaddr;
    const ElfSymbol* sym = data ? r.elf->find_object(vaddr) : r.elf->find_function(vaddr);
    if (!sym) {
      if (!data) fde_frame(r, vaddr, out);
      return;
    }
    out->symbol = symbol_name(*r.elf, *sym);
    out->offset = vaddr - sym->addr;
    out->resolution = sym->from_dynsym ? LOUPE_RESOLVED_DYNSYM : LOUPE_RESOLVED_SYMTAB;
  }

  // No symbol covers a code address: name it by the .eh_frame FDE holding it, so every
  // address of one function groups under one name ("liblzma.so.5.4.1 [fn@0x15b40]").
  void fde_frame(const MappedRegion& r, std::uint64_t vaddr, loupe_frame* out) {
    const FdeRange* fde = r.elf->find_fde(vaddr);
    if (!fde) return;
    std::string_view path(r.map.path);
    if (auto slash = path.rfind('/'); slash != std::string_view::npos)
      path.remove_prefix(slash + 1);
    char start[32];
    std::snprintf(start, sizeof(start), " [fn@0x%llx]",
                  static_cast<unsigned long long>(fde->start));
    std::string name(path);
    name += start;
    out->symbol = strings_.intern(name);
    out->offset = vaddr - fde->start;
    out->resolution = LOUPE_RESOLVED_EH_FRAME;
  }

  const char* symbol_name(const ElfSymbolTable& table, const ElfSymbol& sym) {
    if (sym.interned) return sym.interned;
    std::string_view name = table.name(sym);
    if (name.starts_with("_Z")) {
      int status = 0;
      std::string mangled(name);
      char* demangled = abi::__cxa_demangle(mangled.c_str(), nullptr, nullptr, &status);
      if (status == 0 && demangled) {
        sym.interned = strings_.intern(demangled);
        std::free(demangled);
        return sym.interned;
      }
      std::free(demangled);
    }
    sym.interned = strings_.intern(name);
    return sym.interned;
  }

  const SymbolizerOptions opts_;
  // Where maps are read: the session's watch once it hands it over, else one of its own.
  ProcessWatch own_watch_{opts_.proc_root};
  ProcessWatch* watch_ = &own_watch_;
  const std::size_t max_processes_;
  std::uint64_t evicted_exited_ = 0;
  mutable std::mutex mu_;
  // Declared first so it outlives every table holding pointers into it.
  StringPool strings_;
  std::optional<KallsymsTable> text_;
  std::optional<KallsymsTable> data_;
  ElfFileCache files_;
  std::list<ProcessSpace> lru_;  // most recent first
  std::unordered_map<std::uint32_t, std::list<ProcessSpace>::iterator> index_;
  std::uint64_t maps_reads_ = 0;
  std::uint64_t unwinds_ = 0;
  std::uint64_t call_ = 0;  // numbers symbolize() calls, to check a perf map once per call
  std::unique_ptr<MappingEvents> mappings_;
  std::function<void(const CodeMapping&)> code_listener_;
  RuntimeNamer runtime_namer_;
  // Declared last: its worker stops (within one lookup's bound) before the caches go.
  std::unique_ptr<DebuginfodFetcher> fetcher_;
  bool draining_ = false;  // a record's handling looks a parent up: no nested drain
};

}  // namespace

std::unique_ptr<Symbolizer> make_symbolizer(const SymbolizerOptions& opts) {
  return std::make_unique<ElfSymbolizer>(opts);
}

}  // namespace loupe
