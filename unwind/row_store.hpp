// SPDX-License-Identifier: Apache-2.0
//
// The unwind tables of the processes a session follows, laid out for the in-kernel
// unwinder: one growing array of rows (every file's rows and page index once, however
// many processes map it) and, per process, its executable file mappings with their load bias and
// row range (loupe_unwind_proc). Whoever owns the BPF maps copies the rows appended since its last
// copy and the process entries; this class touches no map, so it is tested on its own.
// Not thread-safe: one owner's thread. Building a file's table (seconds for libjvm under
// emulation) can be handed to another thread (set_builder, build, add_built).
#ifndef LOUPE_UNWIND_ROW_STORE_HPP
#define LOUPE_UNWIND_ROW_STORE_HPP

#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "loupe/unwind.h"
#include "symbols/process_maps.hpp"
#include "unwind/file_rows.hpp"
#include "util/result.hpp"

namespace loupe {

class RowStore {
 public:
  struct FileEntry {
    std::string path;
    std::uint32_t row_first = 0;
    std::uint32_t row_count = 0;   // 0: no table (no .eh_frame, unreadable, store full)
    std::uint32_t page_first = 0;  // its page index, after its rows (loupe/unwind.h)
    std::uint32_t page_count = 0;
    std::uint32_t page_base = 0;
    std::uint64_t build_ns = 0;
    FileRows table;  // rows moved to the store; segments and stats kept
    std::string error;
  };
  struct Stats {
    std::uint64_t files = 0;
    std::uint64_t files_failed = 0;
    std::uint64_t rows_full = 0;      // files left without rows: max_rows reached
    std::uint64_t mappings_over = 0;  // mappings past LOUPE_UNWIND_MAX_MAPPINGS, left out
    std::uint64_t build_ns = 0;
  };

  using FileKey = std::pair<std::uint64_t, std::uint64_t>;  // (dev, inode)
  // A file whose table is to be built: its key as the process's maps name it, its
  // identity as stat() shows it to loupe, its path as the process names it, and where
  // loupe reads it (through the process's root).
  struct BuildJob {
    FileKey key, identity;
    std::string path, at;
  };
  struct Built {
    BuildJob job;
    FileRows table;  // rows and page index
    std::vector<loupe_unwind_row> pages;
    std::uint32_t page_base = 0;
    std::string error;
    std::uint64_t build_ns = 0;
  };
  // Takes a job and the priority of the process that asked (higher first); called again
  // for a job already handed over when a busier process asks for it.
  using Builder = std::function<void(const BuildJob&, std::uint64_t priority)>;

  explicit RowStore(std::string proc_root = "/proc", std::uint32_t max_rows = 1u << 21)
      : proc_root_(std::move(proc_root)), max_rows_(max_rows) {}

  // From now on a file not built yet is handed to `builder` instead of being built on the
  // caller's thread: its mappings are left out of the entry (deferred() says so) until its
  // result comes back through add_built(). prebuild() still builds at once.
  void set_builder(Builder builder) { builder_ = std::move(builder); }
  // The priority later requests are handed over with (the asking process's).
  void set_priority(std::uint64_t priority) { priority_ = priority; }
  // The slow part, on any thread: reads the file and builds its rows and page index.
  static Built build(BuildJob job);
  // A builder's result, on the owner's thread: its rows appended after the others.
  void add_built(Built built);
  // Files handed to the builder and not back yet.
  std::size_t pending() const { return pending_.size(); }

  // Builds the tables of the executable at `path` (as loupe sees it), its interpreter and
  // the libraries it needs, before any process maps them: a command's tables are ready when
  // it execs, so its first milliseconds are not unwound by frame pointers alone. Returns the
  // files built.
  std::size_t prebuild(const std::string& path);

  // The executable file mappings of `pid` (`maps`, as the session's ProcessWatch read
  // them) with rows, building the tables of files not seen yet.
  void load_process(std::uint32_t pid, const std::vector<MapsEntry>& maps, loupe_unwind_proc* out);
  // The same from a read of its own (tools and tests, where no session's watch runs). An
  // error when its maps cannot be read (the process is gone).
  Status load_process(std::uint32_t pid, loupe_unwind_proc* out);

  // The tables of a file some process mapped executable (the kernel's mmap records): a
  // command too short-lived for its maps to be read still gets them, for the next process
  // that runs it. Built now, or handed to the builder.
  void learn_file(std::uint32_t pid, std::uint64_t dev, std::uint64_t inode,
                  const std::string& path) {
    file(pid, dev, inode, path, false);
  }

  // Whether the last load_process() left out a file still being built.
  bool deferred() const { return deferred_; }

  const std::vector<loupe_unwind_row>& rows() const { return rows_; }
  const std::map<std::pair<std::uint64_t, std::uint64_t>, FileEntry>& files() const {
    return files_;
  }
  // The files in the order they were built (a file's rows follow the earlier files').
  using FileRef = const std::pair<const std::pair<std::uint64_t, std::uint64_t>, FileEntry>*;
  const std::vector<FileRef>& file_order() const { return order_; }
  const Stats& stats() const { return stats_; }

 private:
  // nullptr when the file cannot be read, or (`now` false, a builder set) is being built.
  const FileEntry* file(std::uint32_t pid, std::uint64_t dev, std::uint64_t inode,
                        const std::string& path, bool now);
  FileEntry& insert(Built built);
  const FileEntry& alias(const FileKey& key, const FileKey& built);

  std::string proc_root_;
  std::uint32_t max_rows_;
  std::vector<loupe_unwind_row> rows_;
  std::map<std::pair<std::uint64_t, std::uint64_t>, FileEntry> files_;  // by (dev, inode)
  // Each built file's (dev, inode) as stat() shows it to loupe -> its key in files_.
  std::map<std::pair<std::uint64_t, std::uint64_t>, std::pair<std::uint64_t, std::uint64_t>>
      identities_;
  std::vector<FileRef> order_;
  Stats stats_;
  Builder builder_;
  std::uint64_t priority_ = 0;
  std::map<FileKey, FileKey> pending_;             // handed to the builder: key -> identity
  std::map<FileKey, FileKey> pending_identities_;  // identity -> key
  bool deferred_ = false;
};

}  // namespace loupe

#endif  // LOUPE_UNWIND_ROW_STORE_HPP
