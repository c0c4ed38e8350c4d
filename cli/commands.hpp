// SPDX-License-Identifier: Apache-2.0
// The CLI's subcommands; each returns a process exit code (loupe::ExitCode).
#ifndef LOUPE_CLI_COMMANDS_HPP
#define LOUPE_CLI_COMMANDS_HPP

#include <optional>
#include <set>
#include <string>
#include <vector>

namespace loupe {
struct SessionResult;
}

namespace loupe::cli {

// A failed session's errors on stderr, one "error:" a line (commands.cpp).
void print_error(const SessionResult& r);

struct CommonOptions {
  std::vector<std::string> plugin_dirs;
  std::set<std::string> disabled_features;
  bool allow_insecure_plugins = false;
};

int cmd_check(const CommonOptions& common, bool json);
int cmd_list(const CommonOptions& common, bool json);
int cmd_describe(const CommonOptions& common, const std::string& name, bool json);
int cmd_validate(const CommonOptions& common, const std::string& profile);
int cmd_probes(const std::string& binary, bool json);  // probes_command.cpp
int cmd_profiles(bool json);                           // profiles_command.cpp
// A command's PROFILE argument made a file path: a name is looked up (loupe/profile_catalog.hpp),
// a path stays as given. nullopt when found, else the exit code, the error printed.
std::optional<int> resolve_profile_arg(std::string& arg);  // profiles_command.cpp

struct RunOptions {
  std::string profile;
  std::optional<double> duration, interval;
  std::optional<int> pid;
  std::optional<std::string> output;
  std::vector<std::string> command;
  std::optional<double> delivery_delay_ms;
  std::string record;      // --record FILE
  std::string user;        // --user NAME
  bool stats = false;      // --stats
  bool no_follow = false;  // --no-follow: the target process only, not its descendants
  // --reloadable: capabilities kept after attaching, so SIGHUP can start the session again
  // with the profile read anew (a new session loads BPF).
  bool reloadable = false;
};
int cmd_run(const CommonOptions& common, const RunOptions& run);

struct ReplayOptions {
  std::string capture;
  std::string profile;
  std::optional<std::string> output;
};
int cmd_replay(const CommonOptions& common, const ReplayOptions& replay);

struct BenchCliOptions {
  std::string profile;
  unsigned reps = 5;
  bool json = false;
};
int cmd_bench(const CommonOptions& common, const BenchCliOptions& bench);  // bench_command.cpp

struct DiffOptions {
  std::string base, next;   // records.jsonl files, or the output directories holding them
  double threshold = 5.0;   // stacks: percentage points of share; counters: percent shown
  std::string value;        // the stack value that weighs a stack ("" = its first)
  std::string folded_diff;  // write "stack base new" lines (flamegraph's difffolded) here
  bool all = false;         // every histogram and counter, not only the changed ones
};
int cmd_diff(const DiffOptions& diff);  // diff_command.cpp

}  // namespace loupe::cli

#endif
