// SPDX-License-Identifier: Apache-2.0
#include "session/target_scope.hpp"

#include <fmt/format.h>
#include <signal.h>
#include <spdlog/spdlog.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <filesystem>
#include <thread>

#include "session/health_report.hpp"
#include "session/session_error.hpp"
#include "symbols/mapping_events.hpp"

namespace loupe {

namespace {

using Clock = std::chrono::steady_clock;

// The file `exe` names, searched on PATH as execvp will (the command is not started yet).
std::string find_on_path(const std::string& exe) {
  if (exe.find('/') != std::string::npos) return exe;
  const char* path = std::getenv("PATH");
  std::string dirs = path ? path : "/usr/local/bin:/usr/bin:/bin";
  for (std::size_t at = 0; at <= dirs.size();) {
    std::size_t colon = dirs.find(':', at);
    if (colon == std::string::npos) colon = dirs.size();
    const std::string cand = dirs.substr(at, colon - at) + "/" + exe;
    if (::access(cand.c_str(), X_OK) == 0) return cand;
    at = colon + 1;
  }
  return exe;
}

}  // namespace

TargetScope::TargetScope(const SessionSpec& spec) : spec_(spec) {}

StackWalk* TargetScope::walk() {
  if (walk_) return walk_.get();
  // A command or a pid: its processes' files (node alone has 372k rows, libjvm 200k);
  // system-wide: every binary of the machine.
  const std::uint32_t rows = spec_.unwind_rows ? std::max<std::uint32_t>(spec_.unwind_rows, 1024)
                             : spec_.pid > 0 || !spec_.command.empty() ? 1048576u
                                                                       : 2097152u;
  walk_ = make_stack_walk({&watch_, rows, "/proc", &spec_.runtimes});
  return walk_.get();
}

// The symbolizer outlives the scope (the session made it first): it reads on its own after.
TargetScope::~TargetScope() {
  if (symbolizer_) symbolizer_->read_maps_from(nullptr);
}

Status TargetScope::check_pid() const {
  if (spec_.pid <= 0 || ::kill(spec_.pid, 0) == 0 || errno != ESRCH) return {};
  return session_error(ExitCode::kTarget, fmt::format("no process has pid {}", spec_.pid));
}

Status TargetScope::start(FeatureSet& features, Symbolizer* symbolizer) {
  symbolizer_ = symbolizer;
  if (symbolizer_) symbolizer_->read_maps_from(&watch_);
  if (symbolizer_)
    symbolizer_->name_runtime_frames(
        [w = walk()](std::uint32_t pid, std::uint64_t frame, Symbolizer::RuntimeName* out,
                     std::uint32_t max) { return w->name(pid, frame, out, max); });
  if (!spec_.command.empty()) {
    try {
      target_ = std::make_unique<TargetProcess>(spec_.command);
    } catch (const std::exception& e) {
      return session_error(ExitCode::kTarget,
                           fmt::format("cannot start '{}': {}", spec_.command[0], e.what()));
    }
    for (auto& a : spec_.command) command_text_ += (command_text_.empty() ? "" : " ") + a;
  }
  if (spec_.follow) {
    if (target_)
      start_tree(features, target_->pid(), false);  // held before exec: nothing to seed
    else if (spec_.pid > 0)
      start_tree(features, spec_.pid, true);
  }
  follow_mappings();
  return {};
}

void TargetScope::describe(loupe_session_info& info) const {
  info.target_pid = pid();
  info.target_command = target_ ? command_text_.c_str() : nullptr;
  info.tree_map_fd = -1;
  if (tree_) {
    info.flags |= LOUPE_SESSION_TREE;
    info.tree_map_fd = tree_->map_fd();
  }
}

Status TargetScope::release() {
  prebuild_tables();
  if (target_) {
    if (Status released = target_->release(); !released)
      return session_error(ExitCode::kTarget, fmt::format("cannot start '{}': {}", spec_.command[0],
                                                          released.error()));
  }
  track_tables();
  walk()->tick(processes());
  return {};
}

// Whether the command's process runs the command yet, not loupe's own fork of it.
bool TargetScope::command_execd() const {
  std::error_code ec, own;
  static const auto self = std::filesystem::read_symlink("/proc/self/exe", own);
  const auto exe = std::filesystem::read_symlink("/proc/" + std::to_string(pid()) + "/exe", ec);
  return !ec && exe != self;
}

bool TargetScope::tick() {
  if (target_ && walk()->attached() && !command_tracked_ && command_execd()) {
    command_tracked_ = true;
    walk()->track(static_cast<std::uint32_t>(pid()));
  }
  poll_tree();
  walk()->refresh();
  walk()->tick(processes());
  if (symbolizer_) symbolizer_->pump();
  // A target's exit and exec are followed closely; a system-wide session with nothing to
  // do may wait longer (its records and rings keep what happens meanwhile).
  return pid() <= 0 && !walk()->busy();
}

bool TargetScope::ended(std::optional<int>* exit_status) {
  if (target_) {
    if (auto st = target_->poll_exit()) {
      *exit_status = *st;
      spdlog::info("target exited with status {}", *st);
      return true;
    }
  }
  if (spec_.pid > 0 && ::kill(spec_.pid, 0) != 0 && errno == ESRCH) {
    spdlog::info("target pid {} is gone", spec_.pid);
    return true;
  }
  return false;
}

std::vector<pid_t> TargetScope::processes() const {
  std::vector<pid_t> out;
  if (pid() <= 0) return out;
  out.push_back(pid());
  for (pid_t p : descendants_)
    if (p != pid()) out.push_back(p);
  return out;
}

void TargetScope::end(std::chrono::milliseconds grace) {
  if (target_ && !target_->poll_exit()) target_->terminate(grace);
}

// The target and its descendants, in one core-owned map every plugin's filter reads.
// Loaded before any plugin is set up (its fd goes in loupe_session_info). A kernel that
// refuses the tracker leaves the session on "this process only", with a warning and a
// health record, rather than failing it.
void TargetScope::start_tree(FeatureSet& features, pid_t root, bool seed_from_proc) {
  auto tree = ProcessTree::start(features, {});
  Status added = tree ? tree.value()->add_root(root) : Status(make_error(tree.error()));
  if (!added) {
    tree_error_ = added.error();
    spdlog::warn("cannot follow the target's child processes ({}); profiling pid {} only",
                 tree_error_, root);
    return;
  }
  tree_ = std::move(tree).value();
  if (seed_from_proc)
    for (pid_t p : descendants_of(root, read_parent_links())) descendants_.insert(p);
  std::size_t seeded = seed_from_proc ? tree_->seed_from_proc(root) : 0;
  spdlog::info("following pid {} and its descendants ({}{})", root, tree_->mechanism(),
               seed_from_proc ? fmt::format(", {} existing descendant(s) from /proc", seeded)
                              : std::string());
}

// Fork and exit events of the tree. A new process's pid may have been another process's
// before: its cached symbols go at once. An exited one's stay: plugins name its stacks
// at their reports, often long after it exited (memalloc's final report named none of a
// perl run that exited 3 s before the end when they went 2 s after the exit); the
// symbolizer's cache is bounded by its own LRU.
void TargetScope::poll_tree() {
  if (!tree_) return;
  tree_->poll([&](const loupe_tree_event& ev) {
    if (ev.kind == LOUPE_TREE_FORK) {
      descendants_.insert(static_cast<pid_t>(ev.tgid));
      walk()->track(ev.tgid);
      // With mmap records the symbolizer learnt the fork itself, in order: dropping the
      // child's space now could lose mappings of a process that is already gone.
      if (symbolizer_ && !mappings_followed_) symbolizer_->forget(ev.tgid);
    } else if (ev.kind == LOUPE_TREE_EXIT) {
      descendants_.erase(static_cast<pid_t>(ev.tgid));
      walk()->forget(ev.tgid);
    }
  });
}

// The kernel's records of the target's mappings (exec, mmap, fork), so the stacks of a
// process that exits before they are symbolized still resolve. For a command they are
// asked for before it execs, inherited by all it forks; with --pid, on every thread of
// the process and (when following) of the descendants it already has.
void TargetScope::follow_mappings() {
  constexpr std::size_t kMaxTasks = 256;  // x CPUs perf fds; beyond it, counted
  const pid_t root = pid();
  if (root <= 0 || !symbolizer_) return;
  std::vector<pid_t> procs = {root};
  if (!target_ && spec_.follow)
    for (pid_t p : descendants_of(root, read_parent_links())) procs.push_back(p);
  std::vector<pid_t> tasks = target_ ? std::vector<pid_t>{root} : threads_of(procs);
  auto ev = MappingEvents::open(tasks, spec_.follow, kMaxTasks);
  if (!ev) {
    mappings_error_ = ev.error();
    spdlog::warn(
        "no mmap records of the target ({}): stacks of processes that exit early may "
        "stay unresolved",
        mappings_error_);
    return;
  }
  symbolizer_->follow_mappings(std::move(ev).value());
  // The files a short-lived command ran get their unwind tables from its records, for the
  // next process that runs them (a shell loop's commands exit before their maps are read).
  symbolizer_->on_code_mapping([this](const Symbolizer::CodeMapping& m) {
    walk()->learn_file(m.pid, m.path, m.dev_major, m.dev_minor, m.inode);
  });
  mappings_followed_ = true;
}

// System-wide, once the plugins asked for unwind tables: the kernel's records of every
// process say which ones changed, so none is polled (ProcessWatch).
void TargetScope::follow_processes() {
  if (pid() > 0 || !walk()->attached()) return;
  if (Status st = watch_.follow_system(); !st)
    spdlog::warn(
        "no mmap records of the machine's processes ({}): each is read again every few "
        "seconds instead",
        st.error());
}

// The command's executable and its libraries get their tables before it is released.
void TargetScope::prebuild_tables() {
  if (!walk()->attached() || !target_) return;
  const std::string exe = find_on_path(spec_.command[0]);
  const auto t0 = Clock::now();
  const std::size_t n = walk()->prebuild(exe);
  spdlog::debug("unwind tables of {} and its libraries: {} file(s) built in {:.1f} ms", exe, n,
                std::chrono::duration<double, std::milli>(Clock::now() - t0).count());
}

// The target's processes whose unwind tables the in-kernel unwinder gets (when a plugin
// asked for them): the command once it exec'd, or --pid and the descendants it has; the
// tree's forks add the rest. Without a target, every process of the machine.
void TargetScope::track_tables() {
  if (!walk()->attached()) return;
  const pid_t root = pid();
  if (root <= 0) {
    walk()->track_all();  // system-wide
    walk()->refresh();
    return;
  }
  if (target_) {
    // Until it execs, the command is loupe's own fork: its maps would have loupe's
    // libraries built, for nothing, ahead of what the command maps later. Not exec'd
    // within 50 ms (an emulated guest under load): tick() tracks it once it has.
    for (int i = 0; i < 200 && !command_execd(); ++i)
      std::this_thread::sleep_for(std::chrono::microseconds(250));
    command_tracked_ = command_execd();
  }
  if (!target_ || command_tracked_) walk()->track(static_cast<std::uint32_t>(root));
  if (!target_ && spec_.follow)
    for (pid_t p : descendants_of(root, read_parent_links()))
      walk()->track(static_cast<std::uint32_t>(p));
  walk()->refresh();
  if (target_) {
    // The command has just been released: it execs, then its loader maps the libraries
    // within a millisecond or two. Follow that closely (the tables are prebuilt, so a
    // refresh only reads its maps) rather than at the loop's 20 ms tick, during which its
    // frames in libraries not yet entered would be unwound by frame pointers alone.
    constexpr int kPolls = 50, kQuietPolls = 5;
    int quiet = 0;
    for (int i = 0; i < kPolls && quiet < kQuietPolls; ++i) {
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
      quiet = walk()->refresh() ? 0 : quiet + 1;
    }
  }
  spdlog::info("{}", walk()->summary());
}

void TargetScope::report_health(HealthReport& health) const {
  if (walk_) walk_->report_health(health);
  if (const auto c = watch_.counters(); c.reads || c.following || !watch_.follow_error().empty())
    health.process_watch(c, watch_.follow_error(), walk_ ? walk_->ended_unread() : 0);
  if (symbolizer_) {
    SymbolizerStats st = symbolizer_->stats();
    if (st.debuginfod) health.debuginfod(st);
    health.symbol_cache(st);
    if (mappings_followed_) health.mapping_records(&st, "");
  }
  if (!mappings_followed_ && !mappings_error_.empty())
    health.mapping_records(nullptr, mappings_error_);
  if (tree_) {
    auto c = tree_->counters();
    health.process_tree(&c, "");
  } else if (!tree_error_.empty()) {
    health.process_tree(nullptr, tree_error_);
  }
}

}  // namespace loupe
