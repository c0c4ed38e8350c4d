// SPDX-License-Identifier: Apache-2.0
#include "commands.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <poll.h>
#include <signal.h>
#include <spdlog/spdlog.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <functional>
#include <iostream>
#include <nlohmann/json.hpp>
#include <thread>

#include "loupe/config_schema.hpp"
#include "loupe/features.hpp"
#include "loupe/plugin_registry.hpp"
#include "loupe/session.hpp"
#include "loupe/version.hpp"

namespace loupe::cli {
namespace {

std::string description_of(const std::string& feature) {
  for (const auto& f : KernelFeatureProber::table())
    if (feature == f.name) return f.description;
  return "";
}

using nlohmann::json;

std::vector<std::filesystem::path> search_dirs(const CommonOptions& common) {
  std::vector<std::filesystem::path> dirs(common.plugin_dirs.begin(), common.plugin_dirs.end());
  for (auto& d : PluginRegistry::default_search_dirs()) dirs.push_back(d);
  return dirs;
}

json keys_json(const std::vector<ConfigKeyInfo>& keys) {
  json arr = json::array();
  for (const auto& k : keys) {
    json j{{"name", k.name}, {"type", k.type}, {"help", k.help}, {"required", k.required}};
    if (k.default_value) j["default"] = *k.default_value;
    if (k.range) j["range"] = {k.range->first, k.range->second};
    if (!k.choices.empty()) j["choices"] = k.choices;
    if (!k.fields.empty()) j["fields"] = keys_json(k.fields);
    arr.push_back(j);
  }
  return arr;
}

void print_keys(const std::vector<ConfigKeyInfo>& keys, const std::string& indent) {
  for (const auto& k : keys) {
    std::string extra;
    if (k.default_value) extra += fmt::format(" = {}", *k.default_value);
    if (k.required) extra += " (required)";
    if (k.range) extra += fmt::format(" [{}..{}]", k.range->first, k.range->second);
    if (!k.choices.empty()) extra += fmt::format(" one of: {}", fmt::join(k.choices, ", "));
    fmt::print("{}{:<20} {:<10}{}\n{}    {}\n", indent, k.name, k.type, extra, indent, k.help);
    print_keys(k.fields, indent + "    ");
  }
}

json library_json(const PluginLibrary& lib) {
  const auto& d = lib.descriptor();
  return json{{"name", lib.name()},
              {"kind", kind_name(d.kind)},
              {"version", d.version},
              {"description", d.description ? d.description : ""},
              {"abi", fmt::format("{}.{}", d.abi_major, d.abi_minor)},
              {"path", lib.origin()},
              {"config", keys_json(describe_config(d))}};
}

std::atomic<Session*> g_session{nullptr};
volatile sig_atomic_t g_stopping = 0;  // SIGINT/SIGTERM came: no session starts after this one
volatile sig_atomic_t g_hangup = 0;

void on_signal(int) {
  g_stopping = 1;
  if (Session* s = g_session.load()) s->request_stop();
}

// The watcher below sleeps on this eventfd: the SIGHUP handler and the session's end write
// it (write(2) is async-signal-safe), so the watcher wakes for those and nothing else.
int g_watch_fd = -1;

void wake_watcher() {
  const std::uint64_t one = 1;
  if (g_watch_fd >= 0 && ::write(g_watch_fd, &one, sizeof(one)) < 0) {
    // Full (2^64-2 writes) or closed: the watcher has been woken already, or is gone.
  }
}

void on_hangup(int) {
  g_hangup = 1;
  wake_watcher();
}

// Runs `session` with SIGINT and SIGTERM asking it to stop (detach, drain, report). SIGHUP
// asks `reload` whether the profile, read again, is good; when it says so, the session
// stops and *restart is set for the caller to run the next one. Without `reload` (replay),
// SIGHUP is ignored.
SessionResult run_until_signalled(Session& session, const std::function<bool()>& reload = {},
                                  bool* restart = nullptr) {
  struct sigaction sa {};
  sa.sa_handler = on_signal;
  sigemptyset(&sa.sa_mask);
  sigaction(SIGINT, &sa, nullptr);
  sigaction(SIGTERM, &sa, nullptr);
  sa.sa_handler = on_hangup;
  sigaction(SIGHUP, &sa, nullptr);
  g_session = &session;
  if (g_stopping) session.request_stop();  // it came between two sessions
  std::atomic<bool> done{false};
  const int watch_fd = ::eventfd(0, EFD_CLOEXEC);
  g_watch_fd = watch_fd;
  if (g_hangup) wake_watcher();  // it came before the fd was there
  // The check runs off the signal handler and the session's thread: validating loads the
  // plugins' libraries, and the running session must not wait for it. Without the eventfd
  // (no fd left) the watcher looks every 50 ms, as it did before it had one.
  std::thread watcher([&] {
    while (!done.load()) {
      if (g_hangup) {
        g_hangup = 0;
        if (reload && reload() && !g_stopping) {
          if (restart) *restart = true;
          session.request_stop();
          return;
        }
      }
      pollfd p{watch_fd, POLLIN, 0};
      if (::poll(&p, watch_fd >= 0 ? 1 : 0, watch_fd >= 0 ? -1 : 50) > 0) {
        std::uint64_t n;
        if (::read(watch_fd, &n, sizeof(n)) < 0) continue;  // EINTR: look again
      }
    }
  });
  auto r = session.run();
  done = true;
  wake_watcher();
  watcher.join();
  g_watch_fd = -1;
  if (watch_fd >= 0) ::close(watch_fd);
  g_session = nullptr;
  return r;
}

}  // namespace

int cmd_check(const CommonOptions& common, bool as_json) {
  KernelFeatureProber prober(common.disabled_features);
  auto results = prober.all();
  auto missing = missing_capabilities();
  if (as_json) {
    json arr = json::array();
    for (auto& r : results)
      arr.push_back({{"name", r.name},
                     {"category", r.category},
                     {"description", description_of(r.name)},
                     {"available", r.available},
                     {"forced_off", r.forced_off},
                     {"reason", r.reason}});
    std::cout
        << json{{"loupe", version()}, {"features", arr}, {"missing_capabilities", missing}}.dump(2)
        << "\n";
  } else {
    fmt::print("loupe {} kernel preflight (probed, not inferred from the version)\n\n", version());
    std::string category;
    for (auto& r : results) {
      if (r.category != category) {
        category = r.category;
        fmt::print("{}:\n", category);
      }
      fmt::print("  {:<16} {:<5} {}\n", r.name, r.available ? "yes" : (r.forced_off ? "off" : "NO"),
                 r.reason);
    }
    if (!missing.empty()) {
      std::string names;
      for (auto& m : missing) names += (names.empty() ? "" : ", ") + m;
      fmt::print("\nmissing capabilities: {}\n", names);
    }
  }
  // The check itself succeeded; missing privileges are the one thing that blocks every run.
  bool admin = std::find(missing.begin(), missing.end(), "CAP_SYS_ADMIN") == missing.end();
  bool bpf = std::find(missing.begin(), missing.end(), "CAP_BPF") == missing.end() &&
             std::find(missing.begin(), missing.end(), "CAP_PERFMON") == missing.end();
  return admin || bpf ? 0 : static_cast<int>(ExitCode::kPrivilege);
}

int cmd_list(const CommonOptions& common, bool as_json) {
  PluginRegistry registry(search_dirs(common));
  registry.set_allow_insecure(common.allow_insecure_plugins);
  registry.scan_all();
  auto libs = registry.loaded();
  if (as_json) {
    json plugins = json::array(), rejected = json::array(), dirs = json::array();
    for (auto& l : libs) plugins.push_back(library_json(*l));
    for (auto& r : registry.rejections())
      rejected.push_back({{"path", r.path}, {"reason", r.reason}});
    for (auto& d : registry.search_dirs()) dirs.push_back(d.string());
    std::cout << json{{"plugins", plugins}, {"rejected", rejected}, {"search_dirs", dirs}}.dump(2)
              << "\n";
    return 0;
  }
  fmt::print("{:<14} {:<9} {:<8} {:<5} {}\n", "NAME", "KIND", "VERSION", "ABI", "PATH");
  for (auto& l : libs) {
    const auto& d = l->descriptor();
    fmt::print("{:<14} {:<9} {:<8} {}.{:<3} {}\n", l->name(), kind_name(d.kind), d.version,
               d.abi_major, d.abi_minor, l->origin());
  }
  if (libs.empty()) {
    fmt::print("(no plugins found; searched:");
    for (auto& d : registry.search_dirs()) fmt::print(" {}", d.string());
    fmt::print(")\n");
  }
  for (auto& r : registry.rejections()) fmt::print("rejected: {}\n", r.reason);
  return 0;
}

int cmd_describe(const CommonOptions& common, const std::string& name, bool as_json) {
  PluginRegistry registry(search_dirs(common));
  registry.set_allow_insecure(common.allow_insecure_plugins);
  std::shared_ptr<PluginLibrary> lib;
  try {
    lib = registry.resolve(name);
  } catch (const PluginLoadError& e) {
    spdlog::error("{}", e.what());
    return static_cast<int>(ExitCode::kPlugin);
  }
  if (as_json) {
    std::cout << library_json(*lib).dump(2) << "\n";
    return 0;
  }
  const auto& d = lib->descriptor();
  fmt::print("{} ({} {}, plugin ABI {}.{})\n  {}\n  path: {}\n\nconfig keys:\n", lib->name(),
             kind_name(d.kind), d.version, d.abi_major, d.abi_minor,
             d.description ? d.description : "", lib->origin());
  if (d.n_config_keys == 0) fmt::print("  (none)\n");
  print_keys(describe_config(d), "  ");
  return 0;
}

namespace {

// One "error:" a line: a profile's errors as the compiler-style lines the session made
// (file:line:col: error: ...), anything else after "loupe: error: ". Built whole so that a
// refusal reaches stderr in one write: whoever tails the log (a test, journald, a
// collector) never reads its first error without its last.
std::string error_text(const SessionResult& r) {
  std::string text;
  if (!r.profile_errors.empty()) {
    for (const auto& line : r.profile_errors) text += line + "\n";
  } else if (!r.option_errors.empty()) {
    for (const auto& e : r.option_errors) text += "loupe: error: " + e + "\n";
  } else if (!r.error.empty()) {
    text += "loupe: error: " + r.error + "\n";
  }
  return text;
}

}  // namespace

void print_error(const SessionResult& r) {
  std::cerr << error_text(r) << std::flush;
}

namespace {

// Every check that runs no plugin code: `loupe validate`, and SIGHUP's before a reload.
SessionResult check_profile(const CommonOptions& common, const std::string& profile) {
  SessionOptions opts;
  opts.profile_path = profile;
  opts.validate_only = true;
  opts.allow_insecure_plugins = common.allow_insecure_plugins;
  for (auto& d : common.plugin_dirs) opts.extra_plugin_dirs.emplace_back(d);
  Session session(std::move(opts));
  return session.run();
}

}  // namespace

int cmd_validate(const CommonOptions& common, const std::string& profile) {
  auto r = check_profile(common, profile);
  if (r.code != ExitCode::kOk) {
    print_error(r);
    return static_cast<int>(r.code);
  }
  fmt::print("{}: ok\n", profile);
  return 0;
}

namespace {

// SIGHUP: the profile read again and checked as `loupe validate` does, while the session
// runs on. A bad one is refused with every error, and the running profile stays.
bool profile_still_good(const CommonOptions& common, const std::string& profile) {
  auto r = check_profile(common, profile);
  if (r.code != ExitCode::kOk) {
    std::string errors = error_text(r);
    if (!errors.empty()) errors.pop_back();  // spdlog ends the message with its own newline
    spdlog::error("SIGHUP: {} refused, the running profile stays:\n{}", profile, errors);
    return false;
  }
  spdlog::info("SIGHUP: {} checked; the session restarts with it", profile);
  return true;
}

// One session of `loupe run`; *restart: SIGHUP asked for the next one.
SessionResult run_once(const CommonOptions& common, const RunOptions& run, bool* restart) {
  SessionOptions opts;
  opts.profile_path = run.profile;
  opts.duration_s = run.duration;
  opts.interval_s = run.interval;
  opts.pid = run.pid;
  if (run.no_follow) opts.follow = false;
  opts.output_dir = run.output;
  opts.command = run.command;
  opts.delivery_delay_ms = run.delivery_delay_ms;
  opts.record_path = run.record;
  opts.drop_privileges = !run.reloadable;
  opts.user = run.user;
  opts.allow_insecure_plugins = common.allow_insecure_plugins;
  opts.stats = run.stats;
  for (auto& d : common.plugin_dirs) opts.extra_plugin_dirs.emplace_back(d);
  if (!common.disabled_features.empty())
    opts.features = std::make_shared<KernelFeatureProber>(common.disabled_features);
  Session session(std::move(opts));
  // Why SIGHUP cannot restart this session, if it cannot.
  const char* refused =
      !run.command.empty()
          ? "a session that runs a command is not reloaded (it would lose the command): stop it "
            "and run it again"
      : !run.record.empty() ? "a recording session is not reloaded (the capture would end)"
      : (!run.reloadable || !run.user.empty())
          ? "this session gave up its capabilities once attached, and a reload loads BPF again: "
            "run it with --reloadable (and without --user)"
          : nullptr;
  auto reload = [&common, &run, refused] {
    if (!refused) return profile_still_good(common, run.profile);
    spdlog::warn("SIGHUP: {}", refused);
    return false;
  };
  return run_until_signalled(session, reload, restart);
}

}  // namespace

int cmd_run(const CommonOptions& common, const RunOptions& run) {
  SessionResult r;
  for (;;) {
    bool restart = false;
    r = run_once(common, run, &restart);
    if (!restart || g_stopping || (r.code != ExitCode::kOk && r.code != ExitCode::kInterrupted))
      break;
    spdlog::info("reloaded: {}", run.profile);
  }
  print_error(r);
  if (!run.record.empty() && r.error.empty())
    spdlog::info("{} ring records written to {}", r.records_recorded, run.record);
  // As strace and time do: when loupe did its part, its status is the command's own (a
  // command killed by signal N gives 128 + N, as a shell says it), so `loupe run P --
  // make test` gates a script as `make test` would. loupe's own failure outranks it.
  if (r.code == ExitCode::kOk && r.target_exit_status > 0) {
    spdlog::warn("the profiled command exited with status {}", r.target_exit_status);
    return r.target_exit_status;
  }
  return static_cast<int>(r.code);
}

int cmd_replay(const CommonOptions& common, const ReplayOptions& replay) {
  SessionOptions opts;
  opts.profile_path = replay.profile;
  opts.replay_path = replay.capture;
  opts.allow_insecure_plugins = common.allow_insecure_plugins;
  opts.output_dir = replay.output;
  for (auto& d : common.plugin_dirs) opts.extra_plugin_dirs.emplace_back(d);
  Session session(std::move(opts));
  auto r = run_until_signalled(session);
  print_error(r);
  if (r.error.empty())
    spdlog::info("replayed {} ring records from {}", r.records_replayed, replay.capture);
  return static_cast<int>(r.code);
}

}  // namespace loupe::cli
