// SPDX-License-Identifier: Apache-2.0
//
// What the symbolizer knows of one process: its mappings, the ELF table behind each
// file-backed one (executable ones when the maps are read, data ones on first use; shared
// through ElfFileCache) with its load bias, and its JIT symbol files (perf map, jitdump).
// Not thread-safe: the symbolizer's lock guards it.
#ifndef LOUPE_SYMBOLS_PROCESS_SPACE_HPP
#define LOUPE_SYMBOLS_PROCESS_SPACE_HPP

#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "symbols/dwarf_unwinder.hpp"
#include "symbols/elf_file_cache.hpp"
#include "symbols/jitdump.hpp"
#include "symbols/perf_map.hpp"
#include "symbols/process_maps.hpp"
#include "symbols/process_watch.hpp"
#include "symbols/string_pool.hpp"

namespace loupe {

struct MappedRegion {
  MapsEntry map;
  const char* module = nullptr;  // interned path, or "[heap]", "[anon]"...
  bool elf_tried = false;
  std::shared_ptr<const ElfSymbolTable> elf;
  std::optional<std::uint64_t> bias;  // runtime - link-time address; set with elf
  bool debuginfo_asked = false;       // its build-id was handed to debuginfod
};

class ProcessSpace {
 public:
  ProcessSpace(std::uint32_t pid, const std::string& proc_root, const std::string& perf_map_dir);

  // (Re)reads /proc/PID/maps, keeping what was learnt about regions that did not change,
  // and reads the symbol tables of new executable file mappings at once (shared through
  // `files`): a file is opened through /proc/PID/root or map_files, which vanish when the
  // process exits, often before the report that symbolizes its stacks.
  // Returns false with `*err` = errno when the process is gone.
  // The maps come from `watch` (shared with the session's other readers): a read newer
  // than the last one this space took, or made `now` (an exec was seen).
  bool reload(ProcessWatch& watch, bool now, StringPool& strings, ElfFileCache& files, int* err);

  // What the kernel's mmap records (MappingEvents) say happened, applied as it happened,
  // so a process that exits before anyone reads its maps still has them.
  // A new mapping, replacing what it overlaps; an executable file's ELF table is read at
  // once.
  void apply_map(MapsEntry m, StringPool& strings, ElfFileCache& files);
  // An exec: the old image is gone; the new one's mappings follow as apply_map() calls.
  void apply_exec();
  // A fork: the child starts with the parent's mappings (and their tables).
  void inherit_from(const ProcessSpace& parent);
  // When the image the records describe began (its fork or exec), in the records' clock.
  std::uint64_t exec_ns = 0;

  // The region holding `addr`, or nullptr.
  MappedRegion* find(std::uint64_t addr);
  // For data: also the file region whose .bss continues into the anonymous mapping that
  // holds `addr` (the kernel maps the part of .bss beyond the file as anonymous memory).
  MappedRegion* find_data(std::uint64_t addr);

  // Loads the region's ELF table through `cache` once; false when it is not readable ELF.
  bool ensure_elf(MappedRegion& r, ElfFileCache& cache);

  // Opens the file behind a file-backed region (the caller owns the fd); -1 on failure.
  int open_file(const MappedRegion& r) const { return open_mapped_file(r.map); }

  // The regions as last read, sorted by start (the unwinder reports their files).
  std::vector<MappedRegion>& regions() { return regions_; }
  // Counts reloads, so users of the regions can tell that they changed.
  std::uint64_t generation() const { return generation_; }
  // The process's unwinder, made on its first unwind; dropped when the process execs.
  std::unique_ptr<DwarfUnwinder> unwinder;

  PerfMap& perf_map() { return perf_map_; }
  // The process's jitdump: the jit-N.dump file it maps (runtimes mmap it so that perf sees
  // it; read through the process's root, so containers work), else
  // <perf_map_dir>/jit-PID.dump. Replaced by a fresh reader when that path changes.
  JitDump& jitdump();
  const JitDump* jitdump_if_any() const { return jitdump_.get(); }
  std::chrono::steady_clock::time_point loaded_at() const { return loaded_at_; }
  std::uint32_t pid() const { return pid_; }

  // Whether the process has exec'd since the last reload (its /proc/PID/exe is another
  // file): everything learnt of the old image is then wrong, and a rate-limited reload on
  // a miss would keep the old regions until the limit expires. False when it is gone.
  bool exec_since_reload() const;
  std::chrono::steady_clock::time_point exec_checked_at{};  // the symbolizer's last check
  // Someone said the maps changed (Symbolizer::invalidate): re-read on next use, and kept
  // as they are if the process is gone by then.
  bool stale = false;

  // The symbolizer's bookkeeping of when the perf map was last checked.
  std::uint64_t perf_map_checked_call = 0;
  bool perf_map_present = false;
  const char* perf_map_module = nullptr;
  std::uint64_t jitdump_checked_call = 0;
  bool jitdump_present = false;
  const char* jitdump_module = nullptr;  // reset when jitdump() switches files
  // The dump's path as the process names it (its mapping, or the /tmp fallback).
  const std::string& jitdump_name() const { return jitdump_name_; }

 private:
  int open_mapped_file(const MapsEntry& m) const;

  std::uint32_t pid_;
  std::string proc_dir_;  // "<proc_root>/<pid>"
  std::vector<MappedRegion> regions_;
  PerfMap perf_map_;
  std::string mapped_jitdump_;    // path of a mapped jit-N.dump, from the last maps read
  std::string fallback_jitdump_;  // <perf_map_dir>/jit-PID.dump
  std::string jitdump_name_;
  std::unique_ptr<JitDump> jitdump_;
  std::chrono::steady_clock::time_point loaded_at_{};
  std::uint64_t exe_id_ = 0;  // device and inode of /proc/PID/exe at the last reload
  std::uint64_t generation_ = 0;
  std::uint64_t maps_generation_ = 0;  // the watch's read the regions came from
};

}  // namespace loupe

#endif  // LOUPE_SYMBOLS_PROCESS_SPACE_HPP
