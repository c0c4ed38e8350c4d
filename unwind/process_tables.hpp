// SPDX-License-Identifier: Apache-2.0
//
// The host side of the in-kernel unwinder (bpf/include/loupe/unwind.bpf.h): keeps the
// unwind rows and per-process mappings of every process of the session's target in the
// unwinder's maps (the session's, shared by every plugin; a plugin built against ABI <= 1.9
// attaches its own copy). The tables are built once per file (RowStore); a
// process's entry is rewritten when its executable mappings change (exec, dlopen), read
// through the session's ProcessWatch: a target's every tick, a system-wide run's when the
// kernel's records say it changed.
//
// A process without an entry yet (its first milliseconds, a short-lived command) is
// unwound by the rows of the files it maps, found from the VMA (loupe_unwind_files), as
// soon as any process of the session mapped the same file (or the command's prebuild, or
// the records of a process that was never read).
// Files are built on a thread of their own, never the session's (libjvm's table takes
// seconds under emulation, and the session's loop reads rings and maps meanwhile), busiest
// asker first: a target's processes, then a system-wide run's by the CPU they used since the
// last scan, then files known only from mmap records. A command's own files are prebuilt
// before it runs.
// Limits: a file no process was seen with yet, or still being built, is walked by frame
// pointers (counted); a system-wide run's memory is bounded by the rows map's size (files
// past it are counted and unwind by frame pointers), not by the live processes. Any thread
// (the builder's writes what it built itself).
#ifndef LOUPE_UNWIND_PROCESS_TABLES_HPP
#define LOUPE_UNWIND_PROCESS_TABLES_HPP

#include <condition_variable>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "symbols/process_watch.hpp"
#include "unwind/row_store.hpp"
#include "util/result.hpp"

namespace loupe {

class ProcessTables {
 public:
  struct Counters {
    std::uint64_t processes = 0;  // processes with an entry written
    std::uint64_t files = 0;      // files whose tables were built
    std::uint64_t files_failed = 0;
    std::uint64_t rows = 0;       // rows written (each file once)
    std::uint64_t rows_full = 0;  // files left without rows: the rows map was full
    std::uint64_t build_ns = 0;   // time spent building tables
    std::uint64_t write_errors = 0;
    std::uint64_t pending = 0;     // files still being built (at the end: never used)
    std::uint64_t unreadable = 0;  // reads refused (EACCES: a process loupe may not read)
    // System-wide: processes that ended before they settled, never read (their files came
    // from their records; their stacks were walked by those files' rows).
    std::uint64_t ended_unread = 0;
  };

  // Mappings come from `watch` (the session's, which must outlive this); without one,
  // from a watch of its own on /proc.
  explicit ProcessTables(ProcessWatch* watch = nullptr)
      : own_watch_(watch ? nullptr : std::make_unique<ProcessWatch>()),
        watch_(watch ? watch : own_watch_.get()) {}
  // Waits for the file being built, if any (the builder cannot be cut short).
  ~ProcessTables();
  ProcessTables(const ProcessTables&) = delete;
  ProcessTables& operator=(const ProcessTables&) = delete;

  // A consumer's maps (loupe_unwind_rows, loupe_unwind_procs), loaded. False with `*err`
  // when they are not such maps.
  Status attach(int rows_fd, int procs_fd);
  bool attached() const { return !consumers_.empty(); }
  // Its loupe_unwind_files, for the consumer attached with `procs_fd`: an entry for every
  // file with rows, written with them.
  Status attach_files(int procs_fd, int files_fd);
  // The runtimes' side of a process entry (the session's unwinder): `update(pid)` gives
  // its LOUPE_UNWIND_PROC_RUNTIME bits, each runtime's own entry written; `forget(pid)`
  // when it is gone; `poll(rewrite)` at each refresh, which may rewrite an entry's bits.
  struct RuntimeHooks {
    std::function<std::uint32_t(std::uint32_t, const std::vector<MapsEntry>&)> update;
    std::function<void(std::uint32_t)> forget;
    std::function<void(const std::function<void(std::uint32_t, std::uint32_t)>&)> poll;
  };
  void set_runtimes(RuntimeHooks hooks) { runtimes_ = std::move(hooks); }

  void track(std::uint32_t pid) { tracked_[pid] = 0; }
  // A system-wide session: every process of the machine. With the watch's records, a
  // process is read once it exec'd or mapped code and settled (kSettleNs), never again
  // until it changes, and forgotten at its exit; a process that lives less than that is
  // never read (the files it ran come from its records). Without them, found in /proc
  // once a second and re-read every few seconds. A target's processes are re-read every
  // tick.
  void track_all() { all_ = true; }
  void forget(std::uint32_t pid);
  // A file a process of the target mapped executable (the kernel's mmap records): built
  // at the next refresh, within its budget, even when the process is gone by then. The
  // one call of any thread (the symbolizer's drains run on lookups' threads).
  void learn_file(std::uint32_t pid, const std::string& path, std::uint32_t dev_major,
                  std::uint32_t dev_minor, std::uint64_t inode);
  // Takes the files built since the last call, asks for the ones the tracked processes
  // map that are not, and writes what changed; true when an entry was written.
  bool refresh();
  // Whether the last refresh had anything to do (records came, a process was due, files
  // wait to be built): an idle system-wide session ticks less often.
  bool busy() const {
    std::lock_guard tables(mu_);
    return busy_;
  }
  // Builds the tables of a command's executable and its libraries before it runs
  // (RowStore::prebuild); 0 when no consumer is attached.
  std::size_t prebuild(const std::string& exe);

  Counters counters() const;

 private:
  struct Consumer {
    int rows_fd;
    int procs_fd;
    std::uint32_t capacity;
    bool legacy = false;        // a plugin of ABI 1.5-1.10's own map: loupe_unwind_row_v1
    std::uint32_t written = 0;  // rows copied so far
    int files_fd = -1;
    std::size_t files_written = 0;  // of the store's files in the order they were built
  };
  // The rows built since the last call, then the files they belong to.
  void write_rows(Consumer& c);
  void write_new_rows(Consumer& c);

  // Sets the runtime bits of pid's entry (the runtimes' update, from its maps as read).
  // Under mu_.
  void mark_runtimes(std::uint32_t pid, const std::vector<MapsEntry>& maps,
                     loupe_unwind_proc* proc);
  // A runtime became ready for pid after its entry was written: its bits rewritten.
  void rewrite_runtimes(std::uint32_t pid, std::uint32_t bits);
  // The builder thread's side: a job in (started on the first); each result goes into
  // the store, the consumers' rows and the entries of the processes waiting for it.
  void request_build(const RowStore::BuildJob& job, std::uint64_t priority);
  void build_loop();
  // Reads pid's mappings and writes its entry when they changed: 1 written, 0 unchanged,
  // -1 its maps unreadable (why in `*err`). Under mu_.
  int load_and_write(std::uint32_t pid, int* err);
  void forget_locked(std::uint32_t pid);

  // Takes the watch's records (system-wide): which processes to read, learn or forget.
  void follow_changes(std::uint64_t now);

  std::unique_ptr<ProcessWatch> own_watch_;
  ProcessWatch* watch_;
  RuntimeHooks runtimes_;
  std::unique_ptr<RowStore> store_;
  std::vector<Consumer> consumers_;
  std::map<std::uint32_t, std::uint64_t> tracked_;  // pid -> when its maps are next read (ns)
  static constexpr std::uint64_t kNever = ~std::uint64_t{0};  // until its records say it changed
  // System-wide: each process's CPU time (clock ticks) at the last scan and its growth
  // since, so the processes that run get their tables first.
  std::map<std::uint32_t, std::pair<std::uint64_t, std::uint64_t>> cpu_;
  bool all_ = false;
  std::uint64_t next_scan_ns_ = 0;
  bool rescan_ = false;  // the records lost some: every process read again
  bool busy_ = false;    // the last refresh had work
  std::map<std::uint32_t, std::uint64_t> read_generation_;  // the watch's read last used
  std::map<std::uint32_t, std::unique_ptr<loupe_unwind_proc>> written_;
  struct LearntFile {
    std::uint32_t pid;
    std::string path;
  };
  using FileKey = std::pair<std::uint64_t, std::uint64_t>;  // (dev, inode), as the store's
  std::mutex learnt_mu_;
  // Under learnt_mu_. Nothing is queued before a consumer is attached (a session whose
  // plugins take no user stacks would keep every mapping record it ever saw); one entry a
  // file, however many processes map it before the next refresh.
  bool accepting_ = false;
  std::map<FileKey, LearntFile> arrived_;
  std::map<FileKey, LearntFile> learnt_;  // session thread
  std::uint64_t write_errors_ = 0;
  std::uint64_t unreadable_ = 0;
  std::uint64_t ended_unread_ = 0;
  // Processes whose entry left out a file being built: read again once one is back.
  std::set<std::uint32_t> waiting_;
  // Everything above but learnt files: the session's thread and the builder's (which
  // takes build_mu_ only after, never while holding it).
  mutable std::mutex mu_;

  // The builder: jobs by key with the highest priority any asker gave, taken highest
  // first and, between equals, the latest asked (the code running now; an earlier ask may
  // be a process gone since); a key is accepted once (asked again, its priority rises).
  struct Queued {
    std::uint64_t priority, asked;
    RowStore::BuildJob job;
  };
  std::mutex build_mu_;
  std::condition_variable build_cv_;
  std::map<FileKey, Queued> queued_;
  std::uint64_t asks_ = 0;
  std::set<FileKey> accepted_;
  bool stopping_ = false;
  std::thread builder_;
};

}  // namespace loupe

#endif  // LOUPE_UNWIND_PROCESS_TABLES_HPP
