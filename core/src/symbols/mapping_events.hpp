// SPDX-License-Identifier: Apache-2.0
//
// The kernel's own record of the target's address spaces as they change: perf's
// PERF_RECORD_MMAP2 / COMM(exec) / FORK records of a dummy software event on each task
// of the target, inherited by every task they create (perf record does the same).
//
// Why: /proc/PID/maps can only be read while a process lives. A process that runs
// 100 ms (a compiler under make, a shell pipeline stage) is often gone before anything
// asks for its symbols, and its stacks were left as `process_gone`. The kernel writes
// these records synchronously in mmap(2) and exec(2), so no process is too short.
//
// Threading: not thread-safe; the symbolizer drains it under its own lock.
#ifndef LOUPE_SYMBOLS_MAPPING_EVENTS_HPP
#define LOUPE_SYMBOLS_MAPPING_EVENTS_HPP

#include <sys/types.h>

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "symbols/process_maps.hpp"
#include "util/result.hpp"

namespace loupe {

struct MappingEvent {
  enum class Kind { kMap, kExec, kFork, kExit };
  Kind kind;
  std::uint32_t pid;     // the process it happened in (the new one, for kFork)
  std::uint32_t parent;  // kFork: the process it was forked from
  std::uint64_t time_ns;
  MapsEntry map;  // kMap: one mapping (code or data; file-backed, anonymous or memfd)
};

class MappingEvents {
 public:
  struct Counters {
    std::uint64_t records = 0;  // records read (all kinds)
    std::uint64_t maps = 0;
    std::uint64_t execs = 0;
    std::uint64_t forks = 0;
    std::uint64_t exits = 0;
    std::uint64_t lost = 0;          // records the kernel dropped: a buffer was full
    std::uint64_t tasks = 0;         // tasks the events were opened on
    std::uint64_t tasks_missed = 0;  // tasks that refused an event (exited, or the bound)
  };

  // Opens an event on each of `tasks` (thread ids) on every online CPU, inherited by the
  // tasks they create when `inherit`. An error when none could be opened (privileges:
  // CAP_PERFMON; a kernel without perf events). `max_tasks` bounds the fds (tasks x CPUs);
  // tasks beyond it are counted in tasks_missed.
  static Result<std::unique_ptr<MappingEvents>> open(const std::vector<pid_t>& tasks, bool inherit,
                                                     std::size_t max_tasks);
  // Every process of the machine: one event per online CPU (pid -1), as `perf record -a`
  // opens them. Only code mappings are recorded (`code_only`: what unwind tables need;
  // data mappings would be most of a busy machine's records). Needs CAP_PERFMON.
  static Result<std::unique_ptr<MappingEvents>> open_system_wide(bool code_only);
  ~MappingEvents();
  MappingEvents(const MappingEvents&) = delete;
  MappingEvents& operator=(const MappingEvents&) = delete;

  // Hands every record written since the last drain to `fn`, in time order across CPUs.
  // Cheap when nothing is new (one load per buffer), so it may run before each lookup.
  void drain(const std::function<void(const MappingEvent&)>& fn);

  Counters counters() const { return counters_; }

 private:
  struct Buffer;
  MappingEvents() = default;
  std::vector<Buffer> buffers_;
  Counters counters_;
  std::vector<MappingEvent> batch_;
};

// Every thread of `pids` (from /proc/PID/task), for MappingEvents::open.
std::vector<pid_t> threads_of(const std::vector<pid_t>& pids,
                              const std::string& proc_root = "/proc");

}  // namespace loupe

#endif  // LOUPE_SYMBOLS_MAPPING_EVENTS_HPP
