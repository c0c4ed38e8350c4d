// SPDX-License-Identifier: Apache-2.0
//
// Symbolization service offered to every plugin (loupe_host_services.symbolize).
// Kernel addresses via /proc/kallsyms; user addresses per process via /proc/PID/maps and
// the ELF files (symtab/dynsym, PIE bias, build-id); JIT code via /tmp/perf-PID.map and
// jitdump files (jit-PID.dump).
#ifndef LOUPE_SYMBOLIZER_HPP
#define LOUPE_SYMBOLIZER_HPP

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "loupe/abi/host.h"
#include "loupe/abi/records.h"

namespace loupe {

struct SymbolizerOptions {
  std::string kallsyms_path = "/proc/kallsyms";
  std::string proc_root = "/proc";
  std::string perf_map_dir = "/tmp";
  std::size_t max_cached_processes = 256;
  std::size_t max_cached_files = 512;
  // A frame outside every known mapping re-reads /proc/PID/maps (a dlopen or a new JIT
  // region since the last read), at most once per this interval per process, so stacks
  // with garbage frames do not re-read maps on every sample.
  std::uint32_t maps_reread_interval_ms = 100;
  // Prefix of /usr/lib/debug where separate debug files are looked up by build-id.
  std::string debug_root;
  // debuginfod servers (as DEBUGINFOD_URLS) asked, in the background, for the debug file
  // of a module without .symtab nor /usr/lib/debug file; "" = none. Each lookup is
  // bounded by debuginfod_timeout_ms.
  std::string debuginfod_urls;
  std::uint32_t debuginfod_timeout_ms = 5000;
};

// Counters of the caches, for benchmarks, tests and health records.
struct SymbolizerStats {
  std::uint64_t maps_reads = 0;  // /proc/PID/maps parsed (first use and re-reads)
  std::uint64_t elf_loads = 0;   // ELF files parsed (file cache misses)
  std::uint64_t cached_processes = 0;
  // Processes dropped from the full cache that had exited: their stacks can no longer be
  // named (their maps are gone with them).
  std::uint64_t evicted_exited = 0;
  std::uint64_t cached_files = 0;
  std::uint64_t interned_strings = 0;
  std::uint64_t kernel_symbols = 0;  // text symbols read from kallsyms; 0 until first use
  // JIT code entries held from jitdump files of the cached processes, and entries dropped
  // to keep each file's table within its bound (oldest load first).
  std::uint64_t jitdump_entries = 0;
  std::uint64_t jitdump_evictions = 0;
  // User stacks unwound from copies (unwind_user), processes holding an unwinder, and
  // files reported to those unwinders.
  std::uint64_t unwinds = 0;
  std::uint64_t unwinders = 0;
  std::uint64_t unwind_modules = 0;
  // The kernel's mmap/exec/fork records of the target (follow_mappings): records read,
  // records the kernel dropped (a buffer was full: those processes fall back on
  // /proc/PID/maps alone), and tasks the records could not be asked for.
  std::uint64_t mapping_records = 0;
  std::uint64_t mapping_records_lost = 0;
  std::uint64_t mapping_tasks = 0;
  std::uint64_t mapping_tasks_missed = 0;
  // debuginfod (when debuginfod_urls is set): build-ids asked for, and their outcomes.
  bool debuginfod = false;
  std::uint64_t debuginfod_requested = 0;
  std::uint64_t debuginfod_fetched = 0;
  std::uint64_t debuginfod_not_found = 0;
  std::uint64_t debuginfod_timed_out = 0;
  std::uint64_t debuginfod_failed = 0;
};

// What unwind_user() found: `n` addresses written, and why the walk stopped.
struct UserUnwind {
  std::uint32_t n = 0;
  loupe_unwind_status status = LOUPE_UNWIND_UNSUPPORTED;
};

// One source position of a code address: an inlined call, or the function holding it.
struct SourceLocation {
  const char* function;  // DWARF name (unmangled, unqualified); NULL when unknown
  const char* file;      // as the compiler recorded it (absolute when built so)
  std::uint32_t line;    // 0 when unknown
  bool inlined;          // an inlined call: the next entry is where it was inlined
};

class MappingEvents;  // core-internal: symbols/mapping_events.hpp
class ProcessWatch;   // core-internal: symbols/process_watch.hpp

class Symbolizer {
 public:
  virtual ~Symbolizer() = default;
  // Learns the target's mappings from the kernel's records as they happen, besides
  // /proc/PID/maps, so the stacks of a process that exits before they are symbolized
  // still resolve. Drained before every lookup and by pump().
  virtual void follow_mappings(std::unique_ptr<MappingEvents> events) = 0;
  // Applies the records written since the last drain (the session calls it often, so
  // that their buffers do not fill while no lookup comes); returns at once, draining
  // nothing, while a lookup runs (which drains them itself).
  virtual void pump() = 0;
  // A file mapped executable, as the kernel's records say (pid, path as the process sees
  // it, device and inode): called for each while they are applied, from the thread that
  // drains (any caller of a lookup), under the symbolizer's lock, so it must only queue.
  struct CodeMapping {
    std::uint32_t pid;
    std::string path;
    std::uint32_t dev_major, dev_minor;
    std::uint64_t inode;
  };
  virtual void on_code_mapping(std::function<void(const CodeMapping&)> listener) = 0;
  // Reads processes' maps through the session's one reader (shared with the unwind tables
  // and the runtimes, which must outlive this); nullptr: a reader of its own on /proc.
  virtual void read_maps_from(ProcessWatch* watch) { (void)watch; }
  // Names the in-kernel unwinder's runtime frames (addresses with LOUPE_RUNTIME_IS_FRAME in
  // user stacks: a Python function, a Java method): the session's runtimes', from what they
  // read while their processes lived. A frame may name several functions (the methods a
  // JIT inlined at its pc): up to `max` into `out`, innermost first. One the runtime could
  // not read is one entry with an empty `function` and why in `resolution`.
  // Called under the symbolizer's lock, from any thread that symbolizes.
  struct RuntimeName {
    std::string function, file;
    std::uint32_t line = 0;
    std::uint64_t address = 0;  // what the frame says it is (a code object); 0: its tag
    loupe_frame_kind kind = LOUPE_FRAME_PYTHON;
    loupe_frame_resolution resolution = LOUPE_RESOLVED_RUNTIME;
  };
  using RuntimeNamer = std::function<std::uint32_t(std::uint32_t pid, std::uint64_t frame,
                                                   RuntimeName* out, std::uint32_t max)>;
  virtual void name_runtime_frames(RuntimeNamer namer) { (void)namer; }
  // As symbolize(), for a whole stack: a runtime frame that names several functions
  // expands into each, innermost first. Thread-safe.
  virtual void symbolize_stack(std::uint32_t pid, loupe_frame_kind kind, const std::uint64_t* addrs,
                               std::uint32_t n, std::vector<loupe_frame>* out) {
    out->resize(n);
    symbolize(pid, kind, addrs, n, out->data());
  }
  // Resolves `n` addresses of `pid` (kind KERNEL ignores pid) into `out`. Thread-safe.
  // Strings in `out` are owned by the symbolizer and valid until it is destroyed.
  // Unresolved frames keep module+offset where known and say why in `resolution`.
  virtual void symbolize(std::uint32_t pid, loupe_frame_kind kind, const std::uint64_t* addrs,
                         std::uint32_t n, loupe_frame* out) = 0;
  // Data address (a global variable's name), for lock-wait attribution.
  virtual void symbolize_data(std::uint32_t pid, std::uint64_t addr, loupe_frame* out) = 0;
  // A process exec'd, exited or remapped: re-read its maps on next use; kept if it is gone.
  virtual void invalidate(std::uint32_t pid) = 0;
  // Drops what is cached of `pid`: the session's, for a pid that is another process's now
  // or an exited process whose records are all symbolized.
  virtual void forget(std::uint32_t pid) = 0;
  virtual SymbolizerStats stats() const { return {}; }
  // Unwinds a user stack from a copy: `regs` at the sample and `stack_len` bytes copied
  // from the stack pointer up. Writes up to `max` code addresses of `pid` into `out`, the
  // pc first, then return addresses, ready for symbolize(). Thread-safe (same lock).
  virtual UserUnwind unwind_user(std::uint32_t pid, const loupe_user_regs& regs, const void* stack,
                                 std::uint32_t stack_len, std::uint64_t* out, std::uint32_t max) {
    (void)pid, (void)regs, (void)stack, (void)stack_len, (void)out, (void)max;
    return {};
  }
  // File:line of a user code address from the module's DWARF (or its build-id debug
  // file), innermost inlined call first and the function holding the code last. Writes up
  // to `max` entries and returns how many; 0 when there is no DWARF for it. Strings as for
  // symbolize(). No per-address cache (a few µs each): meant for the frames a report
  // shows, not for every sample.
  virtual std::uint32_t source_lines(std::uint32_t pid, std::uint64_t addr, SourceLocation* out,
                                     std::uint32_t max) {
    (void)pid, (void)addr, (void)out, (void)max;
    return 0;
  }
};

std::unique_ptr<Symbolizer> make_symbolizer(const SymbolizerOptions& opts = {});

}  // namespace loupe

#endif  // LOUPE_SYMBOLIZER_HPP
