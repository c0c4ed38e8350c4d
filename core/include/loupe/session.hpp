// SPDX-License-Identifier: Apache-2.0
//
// The embedding API: run a profiling session from a C++ program without the CLI.
//
//   loupe::SessionOptions opts;
//   opts.profile_path = "profiles/default.toml";
//   opts.duration_s = 10;
//   loupe::Session session(std::move(opts));
//   loupe::SessionResult r = session.run();   // blocks; session.request_stop() from any thread
//
// Records come to the profile's sinks (files) and, with `on_record`, to the program itself.
//
// Lifecycle: validate → setup sinks → setup profilers → load → attach → run until the
// duration, the target's exit or request_stop() → detach → stop + drain → final collect →
// flush sinks. No BPF program or link outlives run(), whatever ended it.
#ifndef LOUPE_SESSION_HPP
#define LOUPE_SESSION_HPP

#include <atomic>
#include <filesystem>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "loupe/abi/records.h"
#include "loupe/exit_code.hpp"
#include "loupe/features.hpp"
#include "loupe/program_stats.hpp"

namespace loupe {

struct SessionOptions {
  std::string profile_path;  // a TOML file, or:
  std::string profile_text;  // TOML text (profile_path empty); origin shown as "<profile>"
  std::optional<double> duration_s;
  std::optional<double> interval_s;
  std::optional<int> pid;
  // Whether the target's descendants are profiled too (default: the profile's
  // `[session] follow`, true). false = `--no-follow`: the target process only.
  std::optional<bool> follow;
  std::optional<std::string> output_dir;
  std::vector<std::string> command;  // start this, profile it, end when it exits
  std::vector<std::filesystem::path> extra_plugin_dirs;  // searched first
  std::shared_ptr<FeatureSet> features;                  // injectable; default probes this kernel
  bool validate_only = false;  // stop after every check that runs no plugin code
  // Ring dispatch (docs/performance.md "dispatch").
  std::optional<double> delivery_delay_ms;  // longest a record waits in a ring before it is read
  std::string record_path;                  // write every raw ring record here (loupe run --record)
  std::string replay_path;  // no kernel: feed this capture through decode and sinks (loupe replay)
  // Privileges (docs/reliability.md). Once every probe is attached, give up every
  // capability the session no longer needs, in every thread of the process. Off by
  // default for embedders (it changes the whole process for good); the CLI turns it on.
  bool drop_privileges = false;
  std::string user;  // also switch to this user (name or uid) after attaching; implies the drop
  bool allow_insecure_plugins = false;  // load plugins from group/world-writable files or dirs
  // Per-probe run-time statistics (loupe run --stats; also `[session] stats = true`): the
  // kernel counts runs and time of every BPF program for this session only.
  bool stats = false;
  // Called once on run()'s thread when every probe is attached and the session runs
  // (before a command is released). Must not block for long; may call request_stop().
  std::function<void()> on_running;
  // An in-process sink: every record the session publishes (the profile's sinks get them
  // too), delivered on a thread of its own behind a bounded queue, as any sink's: a slow
  // callback makes records drop, counted in the health row of sink "embedder", and never
  // stalls the rings. `rec` and all it points to are valid for the call only (copy what
  // you keep; loupe/sdk/records.hpp reads them). An exception fails that record, counted.
  std::function<void(const loupe_record& rec)> on_record;
  // With on_record: called on the same thread after each report window's records
  // (is_final on the last, once the session's final report is out).
  std::function<void(bool is_final)> on_flush;
};

struct SessionResult {
  ExitCode code = ExitCode::kOk;
  std::string error;  // empty on success
  // A profile that failed its checks: every error at once, in file order, each
  // "file:line:col: error: message" ("file: error: ..." when it cannot be read); `error`
  // holds the same lines joined.
  std::vector<std::string> profile_errors;
  // SessionOptions that overrode the profile with values out of its keys' bounds (exit 2):
  // every one at once, each "--duration: -1 is out of range [0, 604800]" (named by the
  // `loupe run` option that sets it).
  std::vector<std::string> option_errors;
  int target_exit_status = -1;  // the command's exit status when loupe started one
  bool interrupted = false;
  std::uint64_t records_published = 0;
  std::size_t probes_attached = 0;
  std::size_t probes_failed = 0;
  std::uint64_t records_recorded = 0;  // --record
  std::uint64_t records_replayed = 0;  // replay
  // With stats: every attached probe's totals, read just before the probes were detached,
  // and how long they were attached.
  std::vector<ProgramStats> probe_stats;
  double probes_attached_s = 0;
};

class Session {
 public:
  explicit Session(SessionOptions opts);
  ~Session();
  Session(const Session&) = delete;
  Session& operator=(const Session&) = delete;

  SessionResult run();
  // Thread-safe and async-signal-safe (one atomic store): ends run() soon after.
  void request_stop() noexcept { stop_requested_.store(true, std::memory_order_relaxed); }

 private:
  class Impl;
  SessionOptions opts_;
  std::atomic<bool> stop_requested_{false};
};

}  // namespace loupe

#endif  // LOUPE_SESSION_HPP
