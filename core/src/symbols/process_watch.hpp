// SPDX-License-Identifier: Apache-2.0
//
// What the session's processes are, read in one place: every part that needs a process's
// mappings (the unwind tables, the symbolizer, the runtimes) asks here, and one read of
// /proc/PID/maps serves them all until the process changes.
//
// A system-wide session also follows the kernel's records of every process (mmap of code,
// exec, fork, exit: MappingEvents::open_system_wide). With them, nothing polls: a process
// is read when it changed, a short-lived one is never read at all (the files it ran come
// from its records), and an exit is known without asking the kernel whether a pid lives.
// Without them (no CAP_PERFMON), the parts fall back to reading on their own schedule,
// still through here.
//
// Threading: any thread. maps() may run on the table builder's thread and on the
// symbolizer's while poll() runs on the session's.
#ifndef LOUPE_SYMBOLS_PROCESS_WATCH_HPP
#define LOUPE_SYMBOLS_PROCESS_WATCH_HPP

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "symbols/mapping_events.hpp"
#include "symbols/process_maps.hpp"
#include "util/result.hpp"

namespace loupe {

class ProcessWatch {
 public:
  // One read of a process: its mappings, sorted by start, and which image they are of
  // (the device and inode of /proc/PID/exe, taken before the maps: an exec racing the
  // read leaves an identity that no longer matches, never old maps under a new image).
  struct Snapshot {
    std::vector<MapsEntry> maps;
    std::uint64_t exe_id = 0;
    std::uint64_t generation = 0;  // every read of any process takes the next number
  };

  // What the records said of one process, in the order it happened.
  struct Change {
    enum class Kind {
      kForked,  // a new process, with its parent's mappings
      kExeced,  // a new image: its code mappings follow as kMapped
      kMapped,  // a code mapping (`map`): exec's loader, dlopen, a JIT's file
      kExited,
      kLost,  // the kernel dropped records (a buffer was full): anything may have changed
    };
    Kind kind;
    std::uint32_t pid = 0;
    const MapsEntry* map = nullptr;  // kMapped
  };

  struct Counters {
    std::uint64_t reads = 0;         // /proc/PID/maps files read
    std::uint64_t shared = 0;        // asks served by an earlier read
    std::uint64_t unreadable = 0;    // asks for a process gone (or a zombie)
    std::uint64_t changes = 0;       // processes the records said changed
    std::uint64_t exits = 0;         // processes the records said ended
    std::uint64_t records_lost = 0;  // records the kernel dropped
    bool following = false;          // the system-wide records are open
  };

  explicit ProcessWatch(std::string proc_root = "/proc") : proc_root_(std::move(proc_root)) {}

  // Opens the kernel's records of every process (code mappings, exec, fork, exit). An
  // error says why (privileges: CAP_PERFMON); the session then runs without them.
  Status follow_system();
  bool following() const { return events_ != nullptr; }
  const std::string& proc_root() const { return proc_root_; }
  const std::string& follow_error() const { return follow_error_; }

  // pid's mappings from a read newer than `newer_than` (a generation the asker already
  // holds; 0 for any): the cached read when it is, and the process has not changed since;
  // else /proc/PID/maps read now. Null with `*err` = errno when it cannot be read
  // (ENOENT/ESRCH: gone). A kernel thread, or a zombie, lists no mappings.
  // kNow: a read made now, whatever is cached (an asker who knows it changed).
  static constexpr std::uint64_t kNow = ~std::uint64_t{0};
  std::shared_ptr<const Snapshot> maps(std::uint32_t pid, std::uint64_t newer_than, int* err);

  // Someone learnt that pid's mappings changed (its own records): the next ask reads.
  void changed(std::uint32_t pid);
  // pid is gone: its read is dropped.
  void exited(std::uint32_t pid);

  // Drains the records written since the last call, in time order, into `fn` (loupe's
  // own process left out); the cache is updated before `fn` sees each change.
  void poll(const std::function<void(const Change&)>& fn);

  Counters counters() const;

 private:
  struct Entry {
    std::shared_ptr<const Snapshot> read;
    bool changed = false;
  };
  std::string proc_root_;
  mutable std::mutex mu_;
  std::map<std::uint32_t, Entry> entries_;
  std::uint64_t generation_ = 0;
  Counters counters_;
  // The session's thread alone (poll and follow_system).
  std::unique_ptr<MappingEvents> events_;
  std::string follow_error_;
};

}  // namespace loupe

#endif  // LOUPE_SYMBOLS_PROCESS_WATCH_HPP
