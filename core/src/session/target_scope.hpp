// SPDX-License-Identifier: Apache-2.0
//
// What a session profiles, and what it keeps of it: the command it starts (held before exec
// until every probe is attached) or the pid it was given, the process tree of descendants
// every plugin's filter reads, the kernel's mmap records of those processes, and which of
// them get unwind tables. Forks and exits of the tree reach the tables and the symbolizer
// here; nothing else in the session knows which processes are the target's.
#ifndef LOUPE_SESSION_TARGET_SCOPE_HPP
#define LOUPE_SESSION_TARGET_SCOPE_HPP

#include <sys/types.h>

#include <chrono>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "kernel/process_tree.hpp"
#include "loupe/abi/plugin.h"
#include "loupe/symbolizer.hpp"
#include "plugins/profile.hpp"
#include "session/stack_walk.hpp"
#include "session/target_process.hpp"
#include "symbols/process_watch.hpp"
#include "util/result.hpp"

namespace loupe {

class FeatureSet;
class HealthReport;

class TargetScope {
 public:
  // `spec`: the session's [session] table, overrides applied; it outlives the scope.
  explicit TargetScope(const SessionSpec& spec);
  ~TargetScope();

  // A pid to profile must name a live process: one that is gone (or never was) would run,
  // find nothing and look like a quiet process. kTarget otherwise.
  Status check_pid() const;
  // Forks the command (held before exec), starts the process tree and the mmap records.
  // A tree or records the kernel refuses leave the session on less, with a warning and a
  // health record, not a failure; a command that cannot be forked is kTarget.
  Status start(FeatureSet& features, Symbolizer* symbolizer);
  // The target's part of what every plugin is told at setup.
  void describe(loupe_session_info& info) const;
  // Every probe is attached: the command's tables are built, then it may exec (kTarget when
  // it cannot), and the processes to unwind are named to the tables.
  Status release();

  // Once per session tick: the tree's forks and exits, the tables' refresh, new mappings.
  // A system-wide session whose plugins take user stacks follows every process's
  // records from here on (before privileges drop).
  void follow_processes();
  // The session loop's periodic work; true when the scope is idle (system-wide, nothing
  // changed): the loop may sleep longer.
  bool tick();
  // Why the session should end now: the command exited (its status in `exit_status`) or
  // the pid is gone.
  bool ended(std::optional<int>* exit_status);
  // The session ends: a command still running is stopped (SIGTERM, then SIGKILL).
  void end(std::chrono::milliseconds grace);
  // The tree's last events, before the final health.
  void drain() { poll_tree(); }
  // Just before the final report: the runtimes' last look at the live processes.
  void before_final_report() { walk()->before_final_report(processes()); }
  void report_health(HealthReport& health) const;

  // The target's live processes as the tree knows them: the command or pid, the
  // descendants it had, and those it forked since (without a tree, the root alone). Empty
  // when the session is system-wide.
  std::vector<pid_t> processes() const;

  // Made on first use, once the profile is read (the scope is built before it is).
  StackWalk* walk();
  pid_t pid() const { return target_ ? target_->pid() : spec_.pid; }
  bool started_command() const { return target_ != nullptr; }

 private:
  void start_tree(FeatureSet& features, pid_t root, bool seed_from_proc);
  void follow_mappings();
  void poll_tree();
  void prebuild_tables();
  void track_tables();
  bool command_execd() const;

  const SessionSpec& spec_;
  Symbolizer* symbolizer_ = nullptr;
  // Declared before the target: the tree map and the tables outlive the plugins' use of
  // them (the session destroys its plugins before its scope).
  std::unique_ptr<ProcessTree> tree_;
  // The one reader of what the processes map, for the walk's tables, its runtimes and the
  // symbolizer: declared before the walk, it outlives it.
  ProcessWatch watch_;
  std::unique_ptr<StackWalk> walk_;
  std::unique_ptr<TargetProcess> target_;
  std::set<pid_t> descendants_;  // live, as the tree's fork and exit events say
  std::string command_text_;
  std::string tree_error_;      // why the session follows no tree although asked to
  std::string mappings_error_;  // why the symbolizer has no mmap records of the target
  bool mappings_followed_ = false;
  bool command_tracked_ = false;  // the command's process, once it exec'd
};

}  // namespace loupe

#endif  // LOUPE_SESSION_TARGET_SCOPE_HPP
