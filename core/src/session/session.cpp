// SPDX-License-Identifier: Apache-2.0
#include "loupe/session.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <signal.h>
#include <spdlog/spdlog.h>
#include <sys/stat.h>
#include <time.h>

#include <unistd.h>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <map>
#include <thread>
#include <tuple>

#include "dispatch/capture_file.hpp"
#include "dispatch/record_bus.hpp"
#include "dispatch/ring_dispatcher.hpp"
#include "dispatch/sink_runner.hpp"
#include "kernel/bpf_lifecycle.hpp"
#include "kernel/capabilities.hpp"
#include "kernel/privileges.hpp"
#include "kernel/process_tree.hpp"
#include "loupe/plugin_registry.hpp"
#include "loupe/symbolizer.hpp"
#include "plugins/plugin_instance.hpp"
#include "plugins/profile.hpp"
#include "session/health_report.hpp"
#include "session/plugin_host.hpp"
#include "session/probe_stats_reporter.hpp"
#include "session/target_process.hpp"
#include "session/unwind_tables.hpp"
#include "symbols/mapping_events.hpp"

namespace loupe {
namespace {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

struct Failure {
  ExitCode code;
  std::string message;
};

ExitCode code_for_status(int status) {
  switch (status) {
    case LOUPE_ERR_PERMISSION: return ExitCode::kPrivilege;
    case LOUPE_ERR_UNSUPPORTED:
    case LOUPE_ERR_NOT_FOUND:
    case LOUPE_ERR_KERNEL: return ExitCode::kKernel;
    case LOUPE_ERR_INVALID_ARG: return ExitCode::kProfile;
    default: return ExitCode::kRuntime;
  }
}

// A plugin instance with its host and, for sinks, its runner.
struct Live {
  std::unique_ptr<PluginHost> host;
  std::unique_ptr<PluginInstance> instance;
  std::unique_ptr<SinkRunner> runner;
  const PluginSpec* spec = nullptr;
  bool started = false;
  std::uint64_t collect_errors = 0;  // every failed collect()
  std::uint32_t failed_in_a_row = 0;
  bool disabled = false;  // failed kMaxCollectFailures times in a row: no more collect()
};

void make_output_dir(const std::string& dir) {
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec)
    throw Failure{ExitCode::kRuntime,
                  fmt::format("cannot create output directory {}: {}", dir, ec.message())};
  ::chmod(dir.c_str(), 0700);
}

}  // namespace

class Session::Impl {
 public:
  Impl(SessionOptions& opts, std::atomic<bool>& stop)
      : opts_(opts),
        stop_(stop),
        health_(std::make_unique<HealthReport>([this](const loupe_record& r) { publish(r); },
                                               !opts.replay_path.empty())) {}
  SessionResult run();

 private:
  void load_profile();
  void check_overrides();
  void check_target_pid() const;
  void resolve_plugins();
  void check_privileges();
  void prepare_user_switch();
  void drop_privileges_after_attach();
  void setup_instance(PluginSpec& spec, std::size_t index);
  bool handle_plugin_failure(Live& live, const HookError& e, const char* phase);
  void run_loop();
  void shutdown();
  void emit_core_health(bool is_final);
  void collect_one(Live& p, bool is_final, std::uint64_t window_start, std::uint64_t window_end);
  void publish(const loupe_record& rec);
  void configure_dispatch();
  void start_recording();
  void replay_capture();
  void start_process_tree(pid_t root, bool seed_from_proc);
  void poll_process_tree();
  void process_tree_health();
  void follow_mappings();
  void track_unwind_tables();
  void prebuild_unwind_tables();

  SessionOptions& opts_;
  std::atomic<bool>& stop_;
  Profile profile_;
  std::vector<Diagnostic> diagnostics_;  // the profile's errors, reported all at once
  std::unique_ptr<PluginRegistry> registry_;
  std::vector<std::shared_ptr<PluginLibrary>> libs_;  // parallel to profile_.plugins
  std::shared_ptr<FeatureSet> features_;
  std::unique_ptr<Symbolizer> symbolizer_;
  RingDispatcher rings_;
  RecordBus bus_;
  LinkSet links_;
  ProbeStats probe_stats_;  // --stats: the kernel counts while this fd is open
  std::unique_ptr<ProbeStatsReporter> stats_reporter_;
  std::vector<ProgramStats> final_stats_;  // read just before detach
  std::uint64_t final_stats_ns_ = 0;
  std::string stats_error_;
  void enable_probe_stats();
  HostContext ctx_;
  // The target's descendants (loupe_session_info.tree_map_fd): declared before the
  // plugins so the map outlives every destroy().
  std::unique_ptr<ProcessTree> tree_;
  // Before the plugins: their maps are written until the last refresh.
  UnwindTables unwind_tables_;
  std::vector<Live> sinks_, profilers_;
  std::unique_ptr<TargetProcess> target_;
  std::string tree_error_;      // why the session follows no tree although asked to
  std::string mappings_error_;  // why the symbolizer has no mmap records of the target
  bool mappings_followed_ = false;
  loupe_session_info info_{};
  std::string output_dir_;
  std::string command_text_;
  std::vector<std::string> instance_names_;
  std::vector<const char*> profiler_names_;  // loupe_session_info.profilers
  SessionResult result_;
  std::optional<UserIdentity> run_as_;  // --user
  std::uint64_t session_start_wall_ = 0;
  std::unique_ptr<CaptureWriter> capture_;
  std::unique_ptr<CaptureReader> replay_;
  std::unique_ptr<HealthReport> health_;
};

Session::Session(SessionOptions opts) : opts_(std::move(opts)) {}
Session::~Session() = default;

SessionResult Session::run() {
  Impl impl(opts_, stop_requested_);
  return impl.run();
}

void Session::Impl::load_profile() {
  profile_ = opts_.profile_path.empty()
                 ? read_profile_text(opts_.profile_text, "<profile>", diagnostics_)
                 : read_profile_file(opts_.profile_path, diagnostics_);
  check_overrides();
  auto& s = profile_.session;
  if (opts_.duration_s) s.duration_s = *opts_.duration_s;
  if (opts_.interval_s) s.interval_s = *opts_.interval_s;
  if (opts_.pid) s.pid = *opts_.pid;
  if (opts_.follow) s.follow = *opts_.follow;
  if (opts_.output_dir) s.output_dir = *opts_.output_dir;
  if (!opts_.user.empty()) s.user = opts_.user;
  s.allow_insecure_plugins |= opts_.allow_insecure_plugins;
  if (!opts_.command.empty()) s.command = opts_.command;
  if (s.pid && !s.command.empty())
    throw Failure{ExitCode::kUsage, "give either a pid or a command to profile, not both"};
}

// What the embedder or the command line (loupe run --duration ...) sets over the profile
// is held to the bounds of the profile's own keys, all of it at once, before anything runs.
void Session::Impl::check_overrides() {
  std::vector<std::string> errors;
  auto seconds = [&](const char* flag, const char* key, const std::optional<double>& v) {
    if (!v) return;
    std::string why = check_session_seconds(key, *v);
    if (!why.empty()) errors.push_back(fmt::format("{}: {}", flag, why));
  };
  seconds("--duration", "duration", opts_.duration_s);
  seconds("--interval", "interval", opts_.interval_s);
  if (opts_.pid && (*opts_.pid <= 0 || *opts_.pid > kMaxPid))
    errors.push_back(
        fmt::format("--pid: {} is not a process id (1 to {}; leave --pid out to "
                    "profile the whole system)",
                    *opts_.pid, kMaxPid));
  if (opts_.delivery_delay_ms &&
      !(*opts_.delivery_delay_ms >= 0 && *opts_.delivery_delay_ms <= 10000))
    errors.push_back(fmt::format("--delivery-delay: {} is out of range [0, 10000] ms",
                                 *opts_.delivery_delay_ms));
  if (opts_.output_dir && opts_.output_dir->empty())
    errors.push_back("--output: must not be empty");
  if (errors.empty()) return;
  result_.option_errors = errors;
  throw Failure{ExitCode::kUsage, fmt::format("{}", fmt::join(errors, "\n"))};
}

// A pid to profile must name a live process: profiling a pid that is gone (or was never
// there) would run, find nothing and look like a quiet process.
void Session::Impl::check_target_pid() const {
  const int pid = profile_.session.pid;
  if (pid <= 0 || ::kill(pid, 0) == 0 || errno != ESRCH) return;
  throw Failure{ExitCode::kTarget, fmt::format("no process has pid {}", pid)};
}

void Session::Impl::resolve_plugins() {
  auto dirs = opts_.extra_plugin_dirs;
  for (auto& d : PluginRegistry::default_search_dirs()) dirs.push_back(d);
  registry_ = std::make_unique<PluginRegistry>(dirs);
  registry_->set_allow_insecure(profile_.session.allow_insecure_plugins);
  bool sink_listed = false;
  std::map<std::string, int> seen;
  // Every error of the profile at once, after those of [session] and of the profile's
  // shape: a misspelled plugin name must not hide the key errors of the plugins after it.
  // A missing or unloadable plugin outranks a bad key in the exit code.
  ExitCode code = ExitCode::kProfile;
  auto add_error = [&](ExitCode c, const SourcePos& pos, std::string msg) {
    if (c == ExitCode::kPlugin) code = c;
    diagnostics_.push_back({pos, std::move(msg)});
  };
  for (auto& spec : profile_.plugins) {
    libs_.push_back(nullptr);
    instance_names_.emplace_back();
    if (!spec.enabled) continue;
    bool want_sink = spec.kind == PluginSpec::Kind::kSink;
    sink_listed |= want_sink;
    std::shared_ptr<PluginLibrary> lib;
    try {
      lib = spec.path.empty() ? registry_->resolve(spec.name) : registry_->load_path(spec.path);
    } catch (const PluginLoadError& e) {
      add_error(ExitCode::kPlugin, spec.pos, e.what());
      continue;
    }
    if ((lib->descriptor().kind == LOUPE_KIND_SINK) != want_sink) {
      add_error(ExitCode::kProfile, spec.pos,
                fmt::format("'{}' is a {} but is listed under [[{}]]", spec.name,
                            kind_name(lib->descriptor().kind), want_sink ? "sinks" : "plugins"));
      continue;
    }
    if (!spec.path.empty() && lib->name() != spec.name) {
      add_error(ExitCode::kPlugin, spec.pos,
                fmt::format("{} declares plugin '{}', the profile expects '{}'", spec.path,
                            lib->name(), spec.name));
      continue;
    }
    try {
      validate_plugin_config(spec, lib->descriptor());
    } catch (const ProfileError& e) {
      for (const auto& d : e.diagnostics()) diagnostics_.push_back(d);
      continue;
    }
    int n = seen[spec.name]++;
    instance_names_.back() = n == 0 ? spec.name : fmt::format("{}#{}", spec.name, n + 1);
    libs_.back() = lib;
  }
  if (!sink_listed)
    add_error(ExitCode::kProfile, SourcePos{profile_.file},
              "the profile has no enabled [[sinks]]: results would go nowhere (add e.g. "
              "[[sinks]] name = \"console\")");
  if (diagnostics_.empty()) return;
  // In file order, as a compiler lists them ([session] is read before the plugins, but
  // may stand after them).
  std::stable_sort(diagnostics_.begin(), diagnostics_.end(), [](const auto& a, const auto& b) {
    return std::tie(a.pos.line, a.pos.column) < std::tie(b.pos.line, b.pos.column);
  });
  for (const auto& d : diagnostics_) result_.profile_errors.push_back(d.str());
  throw Failure{code, fmt::format("{}", fmt::join(result_.profile_errors, "\n"))};
}

void Session::Impl::check_privileges() {
  bool any_profiler = false;
  for (std::size_t i = 0; i < profile_.plugins.size(); ++i)
    any_profiler |= libs_[i] && profile_.plugins[i].kind == PluginSpec::Kind::kProfiler;
  if (!any_profiler) return;
  auto missing = missing_capabilities();
  // CAP_SYS_ADMIN alone covers BPF and perf on every kernel; otherwise both are needed.
  bool has_admin = std::find(missing.begin(), missing.end(), "CAP_SYS_ADMIN") == missing.end();
  bool has_bpf_perf = std::find(missing.begin(), missing.end(), "CAP_BPF") == missing.end() &&
                      std::find(missing.begin(), missing.end(), "CAP_PERFMON") == missing.end();
  if (has_admin || has_bpf_perf) return;
  std::string names;
  for (auto& m : missing) names += (names.empty() ? "" : ", ") + m;
  throw Failure{ExitCode::kPrivilege, fmt::format("missing capabilities: {} (need CAP_BPF and "
                                                  "CAP_PERFMON, or CAP_SYS_ADMIN; run as root or "
                                                  "grant them with setcap cap_bpf,cap_perfmon+ep)",
                                                  names)};
}

// Before any plugin runs: the user must exist, and the output directory (created by root,
// 0700) becomes theirs so sinks can still create files once the session has switched.
void Session::Impl::prepare_user_switch() {
  const std::string& name = profile_.session.user;
  if (name.empty()) return;
  std::string err;
  run_as_ = lookup_user(name, &err);
  if (!run_as_) throw Failure{ExitCode::kUsage, fmt::format("--user: {}", err)};
  if (::chown(output_dir_.c_str(), run_as_->uid, run_as_->gid) != 0)
    throw Failure{ExitCode::kPrivilege,
                  fmt::format("--user {}: cannot hand the output directory {} over: {}", name,
                              output_dir_, std::strerror(errno))};
}

void Session::Impl::drop_privileges_after_attach() {
  if (!opts_.drop_privileges && !run_as_) return;
  auto keep = post_attach_capabilities({.signal_command = target_ != nullptr});
  try {
    drop_privileges(keep, run_as_);
  } catch (const std::runtime_error& e) {
    throw Failure{ExitCode::kPrivilege, e.what()};
  }
  std::string kept;
  for (int c : keep) kept += (kept.empty() ? "" : ", ") + capability_name(c);
  spdlog::info(
      "attached; dropped every capability but {}{}", kept,
      run_as_ ? fmt::format(", now running as {} (uid {})", run_as_->name, run_as_->uid) : "");
}

bool Session::Impl::handle_plugin_failure(Live& live, const HookError& e, const char* phase) {
  if (!profile_.session.continue_on_plugin_error)
    throw Failure{code_for_status(e.status()), e.what()};
  spdlog::warn("{} (on_plugin_error = \"continue\": the session goes on without it)", e.what());
  loupe_health h{sizeof(h), LOUPE_HEALTH_ERROR, live.host->instance.c_str(), 1, e.what()};
  loupe_record r{};
  r.size = sizeof(r);
  r.kind = LOUPE_RECORD_HEALTH;
  std::string name = fmt::format("plugin_failed_{}", phase);
  r.name = name.c_str();
  r.health = &h;
  publish(r);
  live.instance->destroy();
  return false;
}

void Session::Impl::setup_instance(PluginSpec& spec, std::size_t index) {
  Live live;
  live.spec = &spec;
  live.host = std::make_unique<PluginHost>(ctx_, instance_names_[index], libs_[index]->name());
  live.instance = std::make_unique<PluginInstance>(libs_[index], instance_names_[index]);
  loupe_setup_args args{sizeof(args), 0, &live.host->services, spec.config.get(), &info_};
  info_.instance_name =
      live.host->instance.c_str();  // valid during setup; plugins copy what they keep
  try {
    live.instance->setup(args);
  } catch (const HookError& e) {
    handle_plugin_failure(live, e, "setup");
    return;
  }
  if (live.instance->is_sink()) {
    live.runner = std::make_unique<SinkRunner>(*live.instance);
    bus_.attach(live.runner.get());
    sinks_.push_back(std::move(live));
  } else {
    profilers_.push_back(std::move(live));
  }
}

void Session::Impl::publish(const loupe_record& rec) {
  auto owned = std::make_shared<const OwnedRecord>(rec, "loupe", ctx_.window_start_ns.load(),
                                                   clock_ns(LOUPE_CLOCK_REALTIME));
  bus_.publish(owned);
}

void Session::Impl::run_loop() {
  const auto& s = profile_.session;
  const auto start = Clock::now();
  const auto end = s.duration_s > 0 ? start + std::chrono::duration_cast<Clock::duration>(
                                                  std::chrono::duration<double>(s.duration_s))
                                    : Clock::time_point::max();
  const auto interval =
      std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(s.interval_s));
  auto next_report = s.interval_s > 0 ? start + interval : Clock::time_point::max();
  std::uint64_t window_start = session_start_wall_;
  while (!stop_.load(std::memory_order_relaxed)) {
    auto now = Clock::now();
    if (now >= end) break;
    if (target_) {
      if (auto st = target_->poll_exit()) {
        result_.target_exit_status = *st;
        spdlog::info("target exited with status {}", *st);
        break;
      }
    }
    if (s.pid > 0 && ::kill(s.pid, 0) != 0 && errno == ESRCH) {
      spdlog::info("target pid {} is gone", s.pid);
      break;
    }
    poll_process_tree();
    unwind_tables_.refresh();
    if (symbolizer_) symbolizer_->pump();
    if (now >= next_report) {
      std::uint64_t window_end = clock_ns(LOUPE_CLOCK_REALTIME);
      ctx_.window_start_ns = window_start;
      ctx_.window_end_ns = window_end;
      for (auto& p : profilers_) {
        if (!p.instance->alive()) continue;
        try {
          collect_one(p, false, window_start, window_end);
        } catch (const HookError& e) {
          spdlog::warn("{}", e.what());
        }
      }
      emit_core_health(false);
      ctx_.window_end_ns = 0;
      for (auto& sk : sinks_) sk.runner->flush(false, std::chrono::seconds(5));
      window_start = window_end;
      next_report += interval;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  if (stop_.load()) result_.interrupted = true;
}

// A plugin whose collect() fails is contained: the failure is logged and counted, the
// session goes on, and after kMaxCollectFailures failures in a row the plugin is disabled
// (no more collect(); its probes stay until the common detach) with a health record.
void Session::Impl::collect_one(Live& p, bool is_final, std::uint64_t window_start,
                                std::uint64_t window_end) {
  constexpr std::uint32_t kMaxCollectFailures = 3;
  if (p.disabled) return;
  try {
    p.instance->collect(is_final, window_start, window_end);
    p.failed_in_a_row = 0;
  } catch (const HookError& e) {
    ++p.collect_errors;
    spdlog::warn("{}", e.what());
    if (++p.failed_in_a_row < kMaxCollectFailures) return;
    p.disabled = true;
    std::string msg = fmt::format(
        "collect() failed {} times in a row; the plugin is disabled, the session goes on "
        "(last error: {})",
        p.failed_in_a_row, e.what());
    spdlog::error("plugin '{}': {}", p.host->instance, msg);
    loupe_health h{sizeof(h), LOUPE_HEALTH_ERROR, p.host->instance.c_str(), p.collect_errors,
                   msg.c_str()};
    loupe_record r{};
    r.size = sizeof(r);
    r.kind = LOUPE_RECORD_HEALTH;
    r.name = "plugin_disabled";
    r.health = &h;
    publish(r);
  }
}

void Session::Impl::configure_dispatch() {
  RingDispatcher::Options o;
  if (opts_.delivery_delay_ms) {  // bounds checked with the other overrides
    o.max_delivery_delay = std::chrono::milliseconds(static_cast<long>(*opts_.delivery_delay_ms));
  }
  o.replay = !opts_.replay_path.empty();
  rings_.configure(o);
  rings_.set_event_handler([this](const DispatchEvent& ev) {
    health_->dispatch_event(ev, clock_ns(LOUPE_CLOCK_REALTIME));
  });
}

void Session::Impl::start_recording() {
  if (opts_.record_path.empty()) return;
  try {
    capture_ = std::make_unique<CaptureWriter>(opts_.record_path, rings_.ring_table());
  } catch (const std::exception& e) {
    throw Failure{ExitCode::kRuntime, e.what()};
  }
  rings_.set_capture(capture_.get());
  if (rings_.ring_count() == 0)
    spdlog::warn("--record: the profile's plugins registered no ring; the capture will be empty");
}

// Maps the capture's rings onto the rings the plugins registered in replay mode, then
// feeds every record through the normal path (header checks, queue, decode, sinks).
void Session::Impl::replay_capture() {
  auto table = rings_.ring_table();
  std::vector<std::size_t> map;
  for (const auto& cr : replay_->rings()) {
    std::size_t found = table.size();
    for (std::size_t i = 0; i < table.size(); ++i)
      if (table[i].instance == cr.instance && table[i].ring == cr.ring) found = i;
    if (found == table.size())
      throw Failure{
          ExitCode::kProfile,
          fmt::format(
              "{}: ring '{}/{}' was recorded but no plugin of the profile registers it in replay "
              "mode (is plugin '{}' enabled, and does it honour LOUPE_SESSION_REPLAY?)",
              opts_.replay_path, cr.instance, cr.ring, cr.instance)};
    const auto& t = table[found];
    if (t.record_type != cr.record_type || t.record_version != cr.record_version)
      throw Failure{ExitCode::kPlugin,
                    fmt::format("{}: ring '{}/{}' was recorded with record type {} version {}, the "
                                "plugin now decodes "
                                "type {} version {}",
                                opts_.replay_path, cr.instance, cr.ring, cr.record_type,
                                cr.record_version, t.record_type, t.record_version)};
    map.push_back(found);
  }
  CaptureReader::Record rec;
  try {
    while (!stop_.load(std::memory_order_relaxed) && replay_->next(&rec)) {
      rings_.inject(map[rec.ring], rec.bytes.data(), static_cast<std::uint32_t>(rec.bytes.size()),
                    true);
      ++result_.records_replayed;
    }
  } catch (const std::runtime_error& e) {
    spdlog::warn("{} (replayed {} records before it)", e.what(), result_.records_replayed);
  }
  if (stop_.load()) result_.interrupted = true;
}

void Session::Impl::emit_core_health(bool is_final) {
  health_->rings(rings_.stats(), rings_.take_coalesced(), is_final);
  if (stats_reporter_)
    stats_reporter_->report(is_final ? final_stats_ : links_.program_stats(),
                            is_final ? final_stats_ns_ : clock_ns(LOUPE_CLOCK_MONOTONIC), is_final);
  else if (is_final)
    ProbeStatsReporter([this](const loupe_record& r) { publish(r); }, 1)
        .report_misses(final_stats_, true);
  if (!is_final) return;
  std::vector<ProfilerHealth> profilers;
  for (auto& p : profilers_)
    profilers.push_back({p.host->instance, p.collect_errors, p.disabled, p.host->rejected.load()});
  std::vector<SinkHealth> sinks;
  for (auto& sk : sinks_) sinks.push_back({sk.host->instance, sk.runner->stats()});
  health_->final_failures(links_.results(), profilers, sinks, stats_error_);
}

// Before any program loads, so the counts cover every run; the fd lives as long as the
// session, so the kernel's (small) accounting cost ends with it.
void Session::Impl::enable_probe_stats() {
  std::string err;
  if (!probe_stats_.enable(&err)) {
    spdlog::warn("--stats: {}; the session runs without per-probe statistics", err);
    stats_error_ = err;
    return;
  }
  stats_reporter_ =
      std::make_unique<ProbeStatsReporter>([this](const loupe_record& r) { publish(r); },
                                           static_cast<unsigned>(sysconf(_SC_NPROCESSORS_ONLN)));
}

void Session::Impl::shutdown() {
  // The session's window ends when it was told to stop (its command exited, its duration
  // or a signal came), not after the detach and drain below, which take up to seconds
  // (each uprobe's unregister waits for an RCU grace period): ages, rates and shares in
  // the final report are as of the stop.
  const std::uint64_t stopped_wall = clock_ns(LOUPE_CLOCK_REALTIME);
  const auto deadline =
      Clock::now() + std::chrono::duration_cast<Clock::duration>(
                         std::chrono::duration<double>(profile_.session.drain_timeout_s));
  // Read before the detach closes the programs: with --stats every count, without them
  // still each program's recursion misses (events the kernel skipped, always counted).
  final_stats_ = links_.program_stats();
  if (stats_reporter_) {
    final_stats_ns_ = clock_ns(LOUPE_CLOCK_MONOTONIC);
    result_.probe_stats = final_stats_;
    result_.probes_attached_s =
        static_cast<double>(final_stats_ns_ - stats_reporter_->start_ns()) / 1e9;
  }
  links_.detach_all();  // nothing new enters the rings from here on
  std::uint64_t mono_deadline = clock_ns(LOUPE_CLOCK_MONOTONIC) +
                                static_cast<std::uint64_t>(profile_.session.drain_timeout_s * 1e9);
  for (auto& p : profilers_) {
    if (!p.instance->alive()) continue;
    try {
      p.instance->stop(mono_deadline);
    } catch (const HookError& e) {
      spdlog::warn("{}", e.what());
    }
  }
  rings_.stop(deadline);
  if (capture_) {
    rings_.set_capture(nullptr);
    result_.records_recorded = capture_->records();
    std::string err = capture_->close();
    if (!err.empty()) spdlog::error("{}", err);
    spdlog::info("recorded {} ring records to {}", result_.records_recorded, opts_.record_path);
  }
  const std::uint64_t now = stopped_wall;
  ctx_.window_start_ns = session_start_wall_;
  ctx_.window_end_ns = now;
  for (auto& p : profilers_) {
    if (!p.instance->alive()) continue;
    try {
      collect_one(p, true, session_start_wall_, now);
    } catch (const HookError& e) {
      spdlog::warn("{}", e.what());
    }
  }
  poll_process_tree();
  emit_core_health(true);
  process_tree_health();
  result_.records_published = bus_.published();
  std::string sink_failures;
  for (auto& sk : sinks_) {
    if (!sk.runner->flush(true, std::chrono::seconds(10)))
      spdlog::warn("sink '{}' did not finish its final flush in time", sk.host->instance);
    sk.runner->stop();
    // A sink that lost output makes the run fail (exit 1) even though the others finished:
    // a script must not mistake a half-written report for a complete one.
    auto st = sk.runner->stats();
    if (st.consume_errors || st.disabled)
      sink_failures += fmt::format(
          "{}sink '{}' failed ({} errors{}): {}", sink_failures.empty() ? "" : "; ",
          sk.host->instance, st.consume_errors, st.disabled ? ", disabled" : "", st.last_error);
  }
  if (!sink_failures.empty()) throw Failure{ExitCode::kRuntime, sink_failures};
  for (auto& p : profilers_) p.instance->destroy();
  for (auto& sk : sinks_) sk.instance->destroy();
}

// The target and its descendants, in one core-owned map every plugin's filter reads.
// Loaded before any plugin is set up (its fd goes in loupe_session_info). A kernel that
// refuses the tracker leaves the session on "this process only", with a warning and a
// health record, rather than failing it.
void Session::Impl::start_process_tree(pid_t root, bool seed_from_proc) {
  std::string err;
  tree_ = ProcessTree::start(*features_, {}, &err);
  if (tree_ && !tree_->add_root(root, &err)) tree_.reset();
  if (!tree_) {
    tree_error_ = err;
    spdlog::warn("cannot follow the target's child processes ({}); profiling pid {} only", err,
                 root);
    return;
  }
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
void Session::Impl::poll_process_tree() {
  if (!tree_) return;
  tree_->poll([&](const loupe_tree_event& ev) {
    if (ev.kind == LOUPE_TREE_FORK) {
      unwind_tables_.track(ev.tgid);
      // With mmap records the symbolizer learnt the fork itself, in order: dropping the
      // child's space now could lose mappings of a process that is already gone.
      if (symbolizer_ && !mappings_followed_) symbolizer_->forget(ev.tgid);
    } else if (ev.kind == LOUPE_TREE_EXIT) {
      unwind_tables_.forget(ev.tgid);
    }
  });
}

// The kernel's records of the target's mappings (exec, mmap, fork), so the stacks of a
// process that exits before they are symbolized still resolve. For a command they are
// asked for before it execs, inherited by all it forks; with --pid, on every thread of
// the process and (when following) of the descendants it already has.
void Session::Impl::follow_mappings() {
  constexpr std::size_t kMaxTasks = 256;  // x CPUs perf fds; beyond it, counted
  const pid_t root = target_ ? target_->pid() : profile_.session.pid;
  if (root <= 0 || !symbolizer_) return;
  std::vector<pid_t> procs = {root};
  if (!target_ && profile_.session.follow)
    for (pid_t p : descendants_of(root, read_parent_links())) procs.push_back(p);
  std::vector<pid_t> tasks = target_ ? std::vector<pid_t>{root} : threads_of(procs);
  std::string err;
  auto ev = MappingEvents::open(tasks, profile_.session.follow, kMaxTasks, &err);
  if (!ev) {
    mappings_error_ = err;
    spdlog::warn(
        "no mmap records of the target ({}): stacks of processes that exit early may "
        "stay unresolved",
        err);
    return;
  }
  symbolizer_->follow_mappings(std::move(ev));
  // The files a short-lived command ran get their unwind tables from its records, for the
  // next process that runs them (a shell loop's commands exit before their maps are read).
  symbolizer_->on_code_mapping([this](const Symbolizer::CodeMapping& m) {
    unwind_tables_.learn_file(m.pid, m.path, m.dev_major, m.dev_minor, m.inode);
  });
  mappings_followed_ = true;
}

// The target's processes whose unwind tables the in-kernel unwinder gets (when a plugin
// asked for them): the command once it exec'd, or --pid and the descendants it has; the
// tree's forks add the rest. Without a target, every process of the machine.
void Session::Impl::track_unwind_tables() {
  if (!unwind_tables_.attached()) return;
  const pid_t root = target_ ? target_->pid() : profile_.session.pid;
  if (root <= 0) {
    unwind_tables_.track_all();  // system-wide
    unwind_tables_.refresh();
    return;
  }
  if (target_) {
    // Until it execs, the command is loupe's own fork: its maps would build the tables of
    // loupe's libraries, for nothing, while the command starts without any.
    std::error_code ec;
    const auto self = std::filesystem::read_symlink("/proc/self/exe", ec);
    const std::string exe = "/proc/" + std::to_string(root) + "/exe";
    for (int i = 0; i < 200 && std::filesystem::read_symlink(exe, ec) == self && !ec; ++i)
      std::this_thread::sleep_for(std::chrono::microseconds(250));
  }
  unwind_tables_.track(static_cast<std::uint32_t>(root));
  if (!target_ && profile_.session.follow)
    for (pid_t p : descendants_of(root, read_parent_links()))
      unwind_tables_.track(static_cast<std::uint32_t>(p));
  unwind_tables_.refresh();
  if (target_) {
    // The command has just been released: it execs, then its loader maps the libraries
    // within a millisecond or two. Follow that closely (the tables are prebuilt, so a
    // refresh only reads its maps) rather than at the loop's 20 ms tick, during which its
    // frames in libraries not yet entered would be unwound by frame pointers alone.
    constexpr int kPolls = 50, kQuietPolls = 5;
    int quiet = 0;
    for (int i = 0; i < kPolls && quiet < kQuietPolls; ++i) {
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
      quiet = unwind_tables_.refresh() ? 0 : quiet + 1;
    }
  }
  auto c = unwind_tables_.counters();
  spdlog::info(
      "unwind tables: {} process(es), {} file(s) ({} without tables), {} rows ({} KiB), "
      "built in {:.1f} ms",
      c.processes, c.files, c.files_failed, c.rows, c.rows * sizeof(loupe_unwind_row) / 1024,
      static_cast<double>(c.build_ns) / 1e6);
}

// The command's executable and its libraries get their tables before it is released.
void Session::Impl::prebuild_unwind_tables() {
  if (!unwind_tables_.attached() || !target_ || profile_.session.command.empty()) return;
  std::string exe = profile_.session.command[0];
  if (exe.find('/') == std::string::npos) {
    const char* path = std::getenv("PATH");
    std::string dirs = path ? path : "/usr/local/bin:/usr/bin:/bin";
    for (std::size_t at = 0; at <= dirs.size();) {
      std::size_t colon = dirs.find(':', at);
      if (colon == std::string::npos) colon = dirs.size();
      const std::string cand = dirs.substr(at, colon - at) + "/" + exe;
      if (::access(cand.c_str(), X_OK) == 0) {
        exe = cand;
        break;
      }
      at = colon + 1;
    }
  }
  const auto t0 = Clock::now();
  const std::size_t n = unwind_tables_.prebuild(exe);
  spdlog::debug("unwind tables of {} and its libraries: {} file(s) built in {:.1f} ms", exe, n,
                std::chrono::duration<double, std::milli>(Clock::now() - t0).count());
}

void Session::Impl::process_tree_health() {
  if (unwind_tables_.attached()) {
    const auto c = unwind_tables_.counters();
    health_->unwind_tables(c.processes, c.files, c.rows, c.rows_full, c.write_errors, c.build_ns);
  }
  if (symbolizer_) {
    SymbolizerStats st = symbolizer_->stats();
    if (st.debuginfod) health_->debuginfod(st);
    health_->symbol_cache(st);
  }
  if (mappings_followed_) {
    SymbolizerStats st = symbolizer_->stats();
    health_->mapping_records(&st, "");
  } else if (!mappings_error_.empty()) {
    health_->mapping_records(nullptr, mappings_error_);
  }
  if (tree_) {
    auto c = tree_->counters();
    health_->process_tree(&c, "");
  } else if (!tree_error_.empty()) {
    health_->process_tree(nullptr, tree_error_);
  }
}

SessionResult Session::Impl::run() {
  try {
    load_profile();
    resolve_plugins();
    if (opts_.validate_only) return result_;
    if (opts_.replay_path.empty()) check_target_pid();
    const bool replay = !opts_.replay_path.empty();
    if (replay) {
      if (!profile_.session.command.empty() || profile_.session.pid)
        throw Failure{ExitCode::kUsage, "a replay profiles no process: drop the command / pid"};
      try {
        replay_ = std::make_unique<CaptureReader>(opts_.replay_path);
      } catch (const std::runtime_error& e) {
        throw Failure{ExitCode::kUsage, e.what()};
      }
    } else {
      check_privileges();
    }
    configure_dispatch();
    if (!replay && (opts_.stats || profile_.session.stats)) enable_probe_stats();

    features_ = opts_.features ? opts_.features : std::make_shared<KernelFeatureProber>();
    {
      SymbolizerOptions so;
      so.max_cached_processes = profile_.session.symbol_processes;
      // debuginfod as gdb, perf and elfutils use it: the servers the environment names.
      if (const char* urls = std::getenv("DEBUGINFOD_URLS")) so.debuginfod_urls = urls;
      symbolizer_ = make_symbolizer(so);
    }
    ctx_.features = features_.get();
    ctx_.symbolizer = symbolizer_.get();
    ctx_.rings = &rings_;
    ctx_.bus = &bus_;
    ctx_.links = &links_;
    ctx_.unwind_tables = &unwind_tables_;
    install_libbpf_logging();

    output_dir_ = profile_.session.output_dir;
    make_output_dir(output_dir_);
    prepare_user_switch();
    if (!profile_.session.command.empty()) {
      try {
        target_ = std::make_unique<TargetProcess>(profile_.session.command);
      } catch (const std::exception& e) {
        throw Failure{ExitCode::kTarget,
                      fmt::format("cannot start '{}': {}", profile_.session.command[0], e.what())};
      }
      for (auto& a : profile_.session.command)
        command_text_ += (command_text_.empty() ? "" : " ") + a;
    }
    if (!replay && profile_.session.follow) {
      if (target_)
        start_process_tree(target_->pid(), false);  // held before exec: nothing to seed
      else if (profile_.session.pid > 0)
        start_process_tree(profile_.session.pid, true);
    }
    if (!replay) follow_mappings();
    session_start_wall_ = clock_ns(LOUPE_CLOCK_REALTIME);
    ctx_.window_start_ns = session_start_wall_;
    health_->session_started(session_start_wall_);
    info_.size = sizeof(info_);
    info_.target_pid = target_ ? target_->pid() : profile_.session.pid;
    info_.target_command = target_ ? command_text_.c_str() : nullptr;
    info_.duration_s = profile_.session.duration_s;
    info_.interval_s = profile_.session.interval_s;
    info_.output_dir = output_dir_.c_str();
    info_.start_wall_ns = session_start_wall_;
    info_.flags = replay ? LOUPE_SESSION_REPLAY : 0;
    info_.tree_map_fd = -1;
    if (tree_) {
      info_.flags |= LOUPE_SESSION_TREE;
      info_.tree_map_fd = tree_->map_fd();
    }
    for (std::size_t i = 0; i < profile_.plugins.size(); ++i)
      if (libs_[i] && profile_.plugins[i].kind == PluginSpec::Kind::kProfiler)
        profiler_names_.push_back(instance_names_[i].c_str());
    info_.profilers = profiler_names_.empty() ? nullptr : profiler_names_.data();
    info_.n_profilers = static_cast<std::uint32_t>(profiler_names_.size());
    ctx_.replay = replay;

    // Sinks first, so every record a profiler emits during start() has somewhere to go.
    for (std::size_t i = 0; i < profile_.plugins.size(); ++i)
      if (libs_[i] && profile_.plugins[i].kind == PluginSpec::Kind::kSink)
        setup_instance(profile_.plugins[i], i);
    for (auto& sk : sinks_) {
      try {
        sk.instance->start();
      } catch (const HookError& e) {
        throw Failure{ExitCode::kRuntime, e.what()};
      }
      sk.runner->start();
    }
    for (std::size_t i = 0; i < profile_.plugins.size(); ++i)
      if (libs_[i] && profile_.plugins[i].kind == PluginSpec::Kind::kProfiler)
        setup_instance(profile_.plugins[i], i);
    for (auto& p : profilers_) {
      if (!p.instance->alive()) continue;
      try {
        p.instance->start();
        p.started = true;
      } catch (const HookError& e) {
        handle_plugin_failure(p, e, "start");
      }
    }
    start_recording();
    rings_.start();
    if (replay && links_.results().size())
      throw Failure{ExitCode::kPlugin,
                    fmt::format("replay: a plugin attached {} probe(s) although the session has "
                                "LOUPE_SESSION_REPLAY set (it must not load BPF in replay)",
                                links_.results().size())};
    for (const auto& pr : links_.results())
      (pr.attached ? result_.probes_attached : result_.probes_failed)++;
    if (!replay) drop_privileges_after_attach();
    spdlog::info("session running: {} profiler(s), {} sink(s), {} probe(s) attached{}",
                 profilers_.size(), sinks_.size(), result_.probes_attached,
                 target_ ? fmt::format(", target pid {}", target_->pid()) : "");
    if (stats_reporter_)
      stats_reporter_->start(clock_ns(LOUPE_CLOCK_MONOTONIC), session_start_wall_);
    if (opts_.on_running) opts_.on_running();
    if (!replay) prebuild_unwind_tables();
    if (target_) {
      std::string err;
      if (!target_->release(&err))
        throw Failure{ExitCode::kTarget,
                      fmt::format("cannot start '{}': {}", profile_.session.command[0], err)};
    }
    if (!replay) track_unwind_tables();
    if (replay)
      replay_capture();
    else
      run_loop();
    if (target_ && !target_->poll_exit()) target_->terminate(std::chrono::seconds(2));
    shutdown();
    if (result_.interrupted) result_.code = ExitCode::kInterrupted;
  } catch (const Failure& f) {
    result_.code = f.code;
    result_.error = f.message;
  } catch (const ProfileError& e) {
    result_.code = ExitCode::kProfile;
    result_.error = e.what();
    for (const auto& d : e.diagnostics()) result_.profile_errors.push_back(d.str());
  } catch (const HookError& e) {
    result_.code = code_for_status(e.status());
    result_.error = e.what();
  } catch (const std::exception& e) {
    result_.code = ExitCode::kRuntime;
    result_.error = e.what();
  }
  if (result_.code != ExitCode::kOk && result_.code != ExitCode::kInterrupted) {
    // Failed part-way: detach and free whatever was set up, flushing what sinks have.
    // Sinks make their final report only when something reached them: a setup error
    // must stand alone, not under an empty report (records 0, no health).
    links_.detach_all();
    rings_.stop(Clock::now() + std::chrono::milliseconds(200));
    for (auto& p : profilers_) p.instance->destroy();
    const bool anything = bus_.published() > 0;
    for (auto& sk : sinks_) {
      if (sk.runner) {
        if (anything) sk.runner->flush(true, std::chrono::seconds(2));
        sk.runner->stop();
      }
      sk.instance->destroy();
    }
    if (target_) target_->terminate(std::chrono::milliseconds(500));
  }
  return result_;
}

}  // namespace loupe
