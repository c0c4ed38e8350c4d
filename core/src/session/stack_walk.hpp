// SPDX-License-Identifier: Apache-2.0
//
// The session's stack walk as the engine sees it: what the target scope and the plugin host
// ask of it, and nothing of how it is done. The walk itself (the unwind tables of the
// target's processes, the BPF maps every plugin's walk shares, the language runtimes whose
// frames it names) is its own library, unwind/ and runtimes/, which makes one through
// make_stack_walk(): the engine calls that one function and includes none of its headers
// (the engine_rooms test, scripts/check-engine-rooms.py, checks the includes).
//
// Threads: everything on the session's thread, but name() (any thread: the symbolizer's).
#ifndef LOUPE_SESSION_STACK_WALK_HPP
#define LOUPE_SESSION_STACK_WALK_HPP

#include <sys/types.h>

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "loupe/abi/host.h"
#include "loupe/abi/plugin.h"
#include "loupe/symbolizer.hpp"
#include "util/result.hpp"

namespace loupe {

class HealthReport;
class ProcessWatch;

class StackWalk {
 public:
  virtual ~StackWalk() = default;

  // A plugin's walk: its rows and process maps get the tables (abi/host.h
  // unwind_tables_attach), its file map the files' entries; the session's shared maps by
  // name (unwinder_maps), an error when the kernel refused one.
  virtual Status attach(int rows_fd, int procs_fd) = 0;
  virtual Status attach_files(int procs_fd, int files_fd) = 0;
  virtual Result<const std::vector<loupe_map_ref>*> maps() = 0;
  // Whether any plugin's walk reads the tables: without one, nothing is built or tracked.
  virtual bool attached() const = 0;

  // The processes whose tables are kept: one (the command once it exec'd, a fork of the
  // tree), every process of the machine (system-wide), one gone.
  virtual void track(std::uint32_t pid) = 0;
  virtual void track_all() = 0;
  virtual void forget(std::uint32_t pid) = 0;
  // Reads what changed in the tracked processes' mappings and writes their tables; true
  // when something did. busy(): builds still queued (the loop should not sleep long).
  virtual bool refresh() = 0;
  virtual bool busy() const = 0;
  // Before the command runs: its executable's and libraries' tables, built now. Their count.
  virtual std::size_t prebuild(const std::string& exe) = 0;
  // A file the kernel's mmap records say `pid` mapped (a short-lived process's, gone before
  // its maps could be read): built for the next process that maps it.
  virtual void learn_file(std::uint32_t pid, const std::string& path, std::uint32_t dev_major,
                          std::uint32_t dev_minor, std::uint64_t inode) = 0;
  // The functions a runtime's frame of `pid` stands for, innermost first (Symbolizer's
  // runtime names); 0 when unknown.
  virtual std::uint32_t name(std::uint32_t pid, std::uint64_t frame, Symbolizer::RuntimeName* out,
                             std::uint32_t max) = 0;
  // The target's live processes, once a session tick and once before the final report.
  virtual void tick(const std::vector<pid_t>& processes) = 0;
  virtual void before_final_report(const std::vector<pid_t>& processes) = 0;

  // One log line of what the tables hold, once the target is released.
  virtual std::string summary() const = 0;
  virtual void report_health(HealthReport& health) const = 0;
  // Processes that ended before their maps were read (the process watch's health row).
  virtual std::uint64_t ended_unread() const = 0;
};

// What a session's walk is made with.
struct StackWalkConfig {
  ProcessWatch* watch = nullptr;  // the session's one reader of mappings; outlives the walk
  std::uint32_t rows = 0;         // the tables' size, resolved from [session] unwind_rows
  std::string proc_root = "/proc";
  // [runtimes.<key>] tables, as the profile parsed them.
  const std::map<std::string, std::shared_ptr<const loupe_config>>* runtimes = nullptr;
};

// Defined by the walk's library (unwind/stack_walk_parts.cpp).
std::unique_ptr<StackWalk> make_stack_walk(const StackWalkConfig& config);

}  // namespace loupe

#endif  // LOUPE_SESSION_STACK_WALK_HPP
