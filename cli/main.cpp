// SPDX-License-Identifier: Apache-2.0
// `loupe` and its subcommands (docs/cli.md). Exit codes: loupe::ExitCode.
#include <spdlog/sinks/stdout_color_sinks.h>
#include <spdlog/spdlog.h>

#include <CLI/CLI.hpp>
#include <cstdio>
#include <cstring>

#include "commands.hpp"
#include "loupe/features.hpp"
#include "loupe/session.hpp"
#include "loupe/version.hpp"

// jemalloc (core/CMakeLists.txt says why loupe uses it) reads this at start-up. A report
// allocates its records in one burst; jemalloc keeps freed pages for 10 s by default, so
// the RSS after each report would stay at the burst's peak. Returned after 1 s instead.
extern "C" {
// NOLINTNEXTLINE: the name and type jemalloc looks up
extern const char* malloc_conf;
const char* malloc_conf = "dirty_decay_ms:1000,muzzy_decay_ms:0";
}

int main(int argc, char** argv) {
  using namespace loupe::cli;
  // Everything after "--" is the command to profile, untouched by option parsing.
  RunOptions run;
  int cli_argc = argc;
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--") == 0) {
      cli_argc = i;
      for (int j = i + 1; j < argc; ++j) run.command.emplace_back(argv[j]);
      break;
    }
  }

  CLI::App app{"loupe: plugin-based eBPF profiler"};
  app.set_version_flag("--version", std::string("loupe ") + loupe::version() + " (plugin ABI " +
                                        std::to_string(loupe::abi_major()) + "." +
                                        std::to_string(loupe::abi_minor()) + ")");
  app.require_subcommand(1);
  CommonOptions common;
  int verbosity = 0;
  bool quiet = false;
  app.add_flag("-v,--verbose", verbosity, "More logging (-v info, -vv debug, -vvv trace)");
  app.add_flag("-q,--quiet", quiet, "Only errors");
  app.add_option("--plugin-dir", common.plugin_dirs,
                 "Extra directory searched for plugins (first)");
  // The names come from the feature table: a misspelt one would otherwise disable nothing
  // and the fallback it was meant to force would silently not run.
  std::vector<std::string> feature_names;
  for (const auto& f : loupe::KernelFeatureProber::table()) feature_names.emplace_back(f.name);
  app.add_option("--disable-feature", common.disabled_features,
                 "Treat a kernel feature as absent (kprobe, fentry, tp_btf, ...) to force "
                 "fallbacks; `loupe check` lists them")
      ->delimiter(',')
      ->check(CLI::IsMember(feature_names));
  app.add_flag("--allow-insecure-plugins", common.allow_insecure_plugins,
               "Load plugins from group/world-writable files or directories (refused by default)");

  bool json = false;
  auto* check =
      app.add_subcommand("check", "Kernel preflight: what this kernel can do, and why not");
  check->add_flag("--json", json, "Machine-readable output");
  auto* list = app.add_subcommand("list", "Plugins and sinks found, with rejected files and why");
  list->add_flag("--json", json, "Machine-readable output");
  std::string name;
  auto* describe =
      app.add_subcommand("describe", "A plugin's kind, version, ABI, path and config keys");
  describe->add_option("name", name, "Plugin or sink name")->required();
  describe->add_flag("--json", json, "Machine-readable output");
  std::string binary;
  auto* probes = app.add_subcommand("probes", "The USDT probes a binary or library ships");
  probes->add_option("binary", binary, "Path, or a name looked up in PATH")->required();
  probes->add_flag("--json", json, "Machine-readable output");
  auto* profiles = app.add_subcommand(
      "profiles", "Profiles found by name (loupe run NAME), where each comes from and what it is");
  profiles->add_flag("--json", json, "Machine-readable output");
  // Every PROFILE below is a path or a name (resolve_profile_arg).
  constexpr const char* kProfileHelp = "TOML profile: a path, or a name from `loupe profiles`";
  std::string profile;
  auto* validate = app.add_subcommand(
      "validate", "Check a profile against the plugins' schemas; runs no plugin code");
  validate->add_option("profile", profile, kProfileHelp)->required();
  auto* runc =
      app.add_subcommand("run",
                         "Run a profile: loupe run PROFILE [options] [-- CMD ARGS...]; exits "
                         "with CMD's own status when loupe succeeded (docs/cli.md)");
  runc->add_option("profile", run.profile, kProfileHelp)->required();
  // Given or not is what counts (no value is a "not given" marker): the session holds
  // each given value to the bounds of the profile key it overrides.
  double duration = 0, interval = 0;
  int pid = 0;
  std::string output;
  auto* duration_opt = runc->add_option("-d,--duration", duration,
                                        "Seconds to run (0 = until the command exits or SIGINT)");
  auto* interval_opt = runc->add_option("-i,--interval", interval,
                                        "Seconds between interval reports (0 = final only)");
  auto* pid_opt = runc->add_option("-p,--pid", pid, "Profile this process (and its descendants)");
  runc->add_flag("--no-follow", run.no_follow,
                 "Profile the target process only, not the processes it forks (default: the "
                 "whole tree; also [session] follow = false)");
  auto* output_opt = runc->add_option("-o,--output", output, "Output directory");
  double delivery_delay = 0;
  auto* delivery_delay_opt = runc->add_option(
      "--delivery-delay", delivery_delay,
      "Longest a ring record waits before it is read, in ms (default 20; producers skip wake-ups "
      "below a watermark)");
  runc->add_option("--record", run.record,
                   "Also write every raw ring record to FILE (for loupe replay)");
  runc->add_option(
      "--user", run.user,
      "Once every probe is attached, switch to this user (name or uid); the output directory "
      "is handed over to it");
  runc->add_flag("--reloadable", run.reloadable,
                 "Keep the capabilities after attaching, so that SIGHUP can reload the profile "
                 "(a session without a command; loupe.service runs the agent so)");
  runc->add_flag(
      "--stats", run.stats,
      "Per-probe BPF run-time statistics (runs, ns per run, events/s, CPU share, silent probes) as "
      "metric and health records; the kernel counts for this session only");
  BenchCliOptions bench;
  auto* benchc = app.add_subcommand("bench",
                                    "What each probe of a profile costs per event on this machine: "
                                    "loupe bench PROFILE [--reps N] [--json]");
  benchc->add_option("profile", bench.profile, kProfileHelp)->required();
  benchc
      ->add_option("--reps", bench.reps,
                   "Repetitions of each measurement (min/median/max over them)")
      ->check(CLI::Range(1u, 1000u));
  benchc->add_flag("--json", bench.json, "Machine-readable output");
  ReplayOptions replay;
  auto* replayc =
      app.add_subcommand("replay",
                         "Feed a --record capture through the profile's decoders and sinks, "
                         "without a kernel: loupe replay FILE PROFILE");
  replayc->add_option("capture", replay.capture, "File written by loupe run --record")->required();
  replayc
      ->add_option("profile", replay.profile, "TOML profile naming the same plugins (path or name)")
      ->required();
  std::string replay_output;
  replayc->add_option("-o,--output", replay_output, "Output directory");

  DiffOptions diff;
  auto* diffc = app.add_subcommand(
      "diff",
      "Compare two runs' records: percentile shifts beyond the buckets' error, stack share "
      "changes, counter changes; exit 8 when something shifted: loupe diff BASE NEW");
  diffc->add_option("base", diff.base, "records.jsonl (or its output directory) of the base run")
      ->required();
  diffc->add_option("new", diff.next, "records.jsonl (or its output directory) of the new run")
      ->required();
  diffc
      ->add_option("--threshold", diff.threshold,
                   "stack share change in percentage points that counts as a change; counters "
                   "shown from this percent")
      ->check(CLI::Range(0.0, 100.0));
  diffc->add_option("--value", diff.value, "stack value that weighs a stack (default: its first)");
  diffc->add_option("--folded-diff", diff.folded_diff,
                    "write flamegraph's difffolded input (stack base new) to this file");
  diffc->add_flag("--all", diff.all, "show every histogram and counter, changed or not");

  try {
    app.parse(cli_argc, argv);
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForAllHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForVersion& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    std::fprintf(stderr, "loupe: error: %s\nRun 'loupe --help' or 'loupe COMMAND --help'.\n",
                 e.what());
    return static_cast<int>(loupe::ExitCode::kUsage);
  }
  if (!run.command.empty() && !runc->parsed()) {
    spdlog::error("'-- CMD' is only valid with 'loupe run'");
    return static_cast<int>(loupe::ExitCode::kUsage);
  }

  auto logger = spdlog::stderr_color_mt("loupe");
  spdlog::set_default_logger(logger);
  // With -vv and -vvv, when: what a debug log is read for (how long a table took to
  // reach the kernel, what a tick waited on).
  spdlog::set_pattern(verbosity >= 2 ? "loupe: %H:%M:%S.%e %^%l%$: %v" : "loupe: %^%l%$: %v");
  spdlog::set_level(quiet            ? spdlog::level::err
                    : verbosity >= 3 ? spdlog::level::trace
                    : verbosity == 2 ? spdlog::level::debug
                    : verbosity == 1 ? spdlog::level::info
                                     : spdlog::level::warn);

  auto dispatch = [&]() -> int {
    std::string* profile_arg = validate->parsed()  ? &profile
                               : runc->parsed()    ? &run.profile
                               : benchc->parsed()  ? &bench.profile
                               : replayc->parsed() ? &replay.profile
                                                   : nullptr;
    if (profile_arg)
      if (auto code = resolve_profile_arg(*profile_arg)) return *code;
    if (check->parsed()) return cmd_check(common, json);
    if (profiles->parsed()) return cmd_profiles(json);
    if (list->parsed()) return cmd_list(common, json);
    if (describe->parsed()) return cmd_describe(common, name, json);
    if (validate->parsed()) return cmd_validate(common, profile);
    if (probes->parsed()) return cmd_probes(binary, json);
    if (benchc->parsed()) return cmd_bench(common, bench);
    if (diffc->parsed()) return cmd_diff(diff);
    if (replayc->parsed()) {
      if (!replay_output.empty()) replay.output = replay_output;
      return cmd_replay(common, replay);
    }
    if (delivery_delay_opt->count()) run.delivery_delay_ms = delivery_delay;
    if (duration_opt->count()) run.duration = duration;
    if (interval_opt->count()) run.interval = interval;
    if (pid_opt->count()) run.pid = pid;
    if (output_opt->count()) run.output = output;
    return cmd_run(common, run);
  };
  try {
    return dispatch();
  } catch (const std::exception& e) {  // a bug: said as one, not an abort
    spdlog::error("internal error: {}", e.what());
    return static_cast<int>(loupe::ExitCode::kRuntime);
  }
}
