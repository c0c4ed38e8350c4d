// SPDX-License-Identifier: Apache-2.0
//
// A TOML profile: parsed, then validated against the schemas plugins declare, before any
// plugin code runs (verification check 2). Every diagnostic carries file:line:col.
#ifndef LOUPE_PLUGINS_PROFILE_HPP
#define LOUPE_PLUGINS_PROFILE_HPP

#include <map>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include "loupe/abi/plugin.h"
#include "plugins/config_tree.hpp"

namespace loupe {

struct SourcePos {
  std::string file;
  std::uint32_t line = 0;  // 0: the file as a whole (it cannot be read)
  std::uint32_t column = 0;
  std::string str() const;  // "file:line:col", or "file" without a line
};

struct Diagnostic {
  SourcePos pos;
  std::string message;
  std::string str() const { return pos.str() + ": error: " + message; }
};

// Thrown with every problem found (not just the first).
class ProfileError : public std::runtime_error {
 public:
  explicit ProfileError(std::vector<Diagnostic> diags);
  const std::vector<Diagnostic>& diagnostics() const { return diags_; }

 private:
  std::vector<Diagnostic> diags_;
};

struct SessionSpec {
  double duration_s = 0;
  double interval_s = 0;
  std::string output_dir = "loupe-out";
  int pid = 0;
  std::vector<std::string> command;
  bool continue_on_plugin_error = false;  // on_plugin_error = "fail" | "continue"
  double drain_timeout_s = 2.0;
  std::string user;                     // switch to this user once attached (--user)
  bool allow_insecure_plugins = false;  // load plugins from group/world-writable paths
  bool stats = false;                   // per-probe BPF run-time statistics (loupe run --stats)
  bool follow = true;  // the target's descendants are profiled too (--no-follow: false)
  // Processes the symbolizer keeps, exited ones included (their stacks are named at
  // reports after they exit); past it the least recently used go, counted.
  std::size_t symbol_processes = 1024;
  // Each runtime's own table, [runtimes.<key>], by key: validated against the keys its row
  // of the runtime table declares, defaults filled (a table for every runtime of the table).
  std::map<std::string, std::shared_ptr<const loupe_config>> runtimes;
  // Rows of the session's unwinder tables (0: by the target, see the key's description).
  std::uint32_t unwind_rows = 0;
  // Windows ([session] rotate): every rotate_s seconds the sinks write what the window's
  // interval records add up to into a directory of its own; retain / retain_bytes bound
  // how many are kept (0: no bound).
  double rotate_s = 0;
  std::size_t retain = 0;
  std::uint64_t retain_bytes = 0;
  // loupe's declared cost, percent of all online CPUs (0: none): measured at every report.
  double max_cpu_percent = 0;
  // The ring reader's timed drain period, ms (--delivery-delay overrides it).
  std::uint32_t delivery_delay_ms = 20;
};

struct PluginSpec {
  enum class Kind { kProfiler, kSink } kind = Kind::kProfiler;
  std::string name;
  std::string path;  // `library = "..."`: explicit .so path, relative to the profile's folder
  bool enabled = true;
  SourcePos pos;
  std::shared_ptr<void> raw;             // the TOML table (toml::table), kept for schema validation
  std::unique_ptr<loupe_config> config;  // filled by validate_plugin_config()
};

struct Profile {
  std::shared_ptr<void> document;  // the parsed TOML (toml::table); specs point into it
  std::string file;
  SessionSpec session;
  std::vector<PluginSpec> plugins;  // profilers and sinks, in file order
};

// The largest pid a kernel hands out (PID_MAX_LIMIT).
inline constexpr std::int64_t kMaxPid = 4194304;

// Parses and checks [session] and the shape of [[plugins]] / [[sinks]], adding every
// problem found to `diags` (a session can add the plugins' own after them). Throws
// ProfileError only when there is nothing to check: the file cannot be read, or it is
// not TOML (the parser stops at the first syntax error).
Profile read_profile_file(const std::string& path, std::vector<Diagnostic>& diags);
Profile read_profile_text(const std::string& text, const std::string& origin,
                          std::vector<Diagnostic>& diags);

// The same, throwing ProfileError with every problem found.
Profile parse_profile_file(const std::string& path);
Profile parse_profile_text(const std::string& text, const std::string& origin);

// Why `seconds` is not a valid value of the [session] key `key` ("duration", "interval",
// "drain_timeout"), or "" when it is: the bounds a profile and the command line share.
std::string check_session_seconds(std::string_view key, double seconds);

// Validates one plugin table against the declared keys (unknown keys, types, ranges,
// required keys) and builds the config tree with defaults applied. Throws ProfileError.
void validate_plugin_config(PluginSpec& spec, const loupe_plugin_descriptor& d);

// Parses a declared default ("100", "true", "\"ns\"", "[]") into `out` of `type`.
bool parse_default(const loupe_config_key& key, std::uint32_t stride, ConfigValue& out);

}  // namespace loupe

#endif  // LOUPE_PLUGINS_PROFILE_HPP
