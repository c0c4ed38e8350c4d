// SPDX-License-Identifier: Apache-2.0
//
// The conductor: one run, as a sequence of steps over parts that own their state (the
// plugin set, the target scope, the recording, the privilege plan, the probe accounting).
// Each step returns why the run cannot go on; the first that fails ends it, and run()
// then detaches and frees whatever was set up.
#include "loupe/session.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <spdlog/spdlog.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <optional>
#include <thread>

#include "dispatch/record_bus.hpp"
#include "dispatch/ring_dispatcher.hpp"
#include "kernel/bpf_lifecycle.hpp"
#include "loupe/symbolizer.hpp"
#include "plugins/plugin_instance.hpp"
#include "plugins/profile.hpp"
#include "session/budget_controller.hpp"
#include "session/cadence.hpp"
#include "session/health_report.hpp"
#include "session/overrides.hpp"
#include "session/plugin_host.hpp"
#include "session/plugin_set.hpp"
#include "session/privilege_plan.hpp"
#include "session/probe_accounting.hpp"
#include "session/recording.hpp"
#include "session/session_error.hpp"
#include "session/target_scope.hpp"
#include "session/window_store.hpp"

namespace loupe {

using Clock = std::chrono::steady_clock;

class Session::Impl {
 public:
  Impl(SessionOptions& opts, std::atomic<bool>& stop)
      : opts_(opts),
        stop_(stop),
        health_([this](const loupe_record& r) { publish(r); }, !opts.replay_path.empty()),
        probes_([this](const loupe_record& r) { publish(r); }),
        recording_(opts.record_path, opts.replay_path),
        scope_(profile_.session),
        plugins_([this](const loupe_record& r) { publish(r); }) {}
  SessionResult run();

 private:
  Status conduct();
  Status load_profile();
  Status check_replay();
  void make_services();
  void describe_session();
  Status count_probes();
  void run_loop();
  void report_window(std::uint64_t window_start, std::uint64_t window_end);
  void end_window(std::uint64_t window_end);
  Status shutdown();
  void abort();
  void emit_core_health(bool is_final);
  void publish(const loupe_record& rec);
  void configure_dispatch();

  SessionOptions& opts_;
  std::atomic<bool>& stop_;
  Profile profile_;
  std::vector<Diagnostic> diagnostics_;  // the profile's errors, reported all at once
  std::shared_ptr<FeatureSet> features_;
  std::unique_ptr<Symbolizer> symbolizer_;
  RingDispatcher rings_;
  RecordBus bus_;
  LinkSet links_;
  HostContext ctx_;
  HealthReport health_;
  ProbeAccounting probes_;
  Recording recording_;
  PrivilegePlan privileges_;
  // Before the plugins: the tree map and the unwind tables outlive every destroy().
  TargetScope scope_;
  PluginSet plugins_;
  // [session] max_cpu_percent: thins the profilers that can be to stay within it.
  std::optional<BudgetController> budget_;
  loupe_session_info info_{};
  SessionResult result_;
  std::uint64_t session_start_wall_ = 0;
  // [session] rotate: the windows written so far, and where the current one began.
  std::optional<WindowStore> windows_;
  std::uint64_t window_open_wall_ = 0;
  std::uint64_t report_start_wall_ = 0;  // the current interval report's start
};

Session::Session(SessionOptions opts) : opts_(std::move(opts)) {}
Session::~Session() = default;

SessionResult Session::run() {
  Impl impl(opts_, stop_requested_);
  return impl.run();
}

SessionResult Session::Impl::run() {
  Status st;
  try {
    st = conduct();
  } catch (const ProfileError& e) {
    for (const auto& d : e.diagnostics()) result_.profile_errors.push_back(d.str());
    st = session_error(ExitCode::kProfile, e.what());
  } catch (const HookError& e) {
    st = session_error(exit_code_for_plugin_status(e.status()), e.what());
  } catch (const std::exception& e) {
    st = session_error(ExitCode::kRuntime, e.what());
  }
  if (!st) {
    result_.code = exit_code_of(st);
    result_.error = st.error();
    abort();
  }
  return result_;
}

Status Session::Impl::conduct() {
  const bool replay = recording_.replaying();
  LOUPE_TRY(load_profile());
  if (opts_.validate_only) return {};
  LOUPE_TRY(replay ? check_replay() : scope_.check_pid());
  LOUPE_TRY(privileges_.check(!replay && plugins_.has_profilers()));
  configure_dispatch();
  // A budget is checked against the kernel's count of the programs' run time.
  if (!replay && (opts_.stats || profile_.session.stats || profile_.session.max_cpu_percent > 0)) {
    probes_.enable();
    if (probes_.counting() && profile_.session.max_cpu_percent > 0)
      budget_.emplace(
          profile_.session.max_cpu_percent, static_cast<unsigned>(sysconf(_SC_NPROCESSORS_ONLN)),
          [this](const loupe_record& r) { publish(r); }, plugins_.budget_knobs());
    probes_.set_budget(profile_.session.max_cpu_percent,
                       [this] { return budget_ ? budget_->summary() : std::string(); });
  }
  make_services();
  LOUPE_TRY(make_output_dir(profile_.session.output_dir));
  if (profile_.session.rotate_s > 0) {
    windows_.emplace(profile_.session.output_dir, profile_.session.retain,
                     profile_.session.retain_bytes);
    windows_->clean_partial();
  }
  LOUPE_TRY(privileges_.prepare_user(profile_.session.user, profile_.session.output_dir));
  LOUPE_TRY(scope_.start(*features_, symbolizer_.get()));
  describe_session();
  LOUPE_TRY(plugins_.start(ctx_, bus_, info_));
  scope_.follow_processes();  // before privileges drop: system-wide records need them
  LOUPE_TRY(recording_.start(rings_));
  rings_.start();
  LOUPE_TRY(count_probes());
  if (!replay)
    LOUPE_TRY(privileges_.drop_after_attach(opts_.drop_privileges, scope_.started_command()));
  spdlog::info("session running: {} profiler(s), {} sink(s), {} probe(s) attached{}",
               plugins_.profiler_count(), plugins_.sink_count(), result_.probes_attached,
               scope_.started_command() ? fmt::format(", target pid {}", scope_.pid()) : "");
  probes_.start(clock_ns(LOUPE_CLOCK_MONOTONIC), session_start_wall_);
  if (opts_.on_running) opts_.on_running();
  LOUPE_TRY(scope_.release());
  if (replay) {
    LOUPE_TRY(recording_.replay(rings_, stop_));
    result_.records_replayed = recording_.replayed();
  } else {
    run_loop();
  }
  result_.interrupted = stop_.load();
  // Methods compiled since the last ask are named in the final report; a command still
  // running is stopped just below.
  scope_.before_final_report();
  scope_.end(std::chrono::seconds(2));
  LOUPE_TRY(shutdown());
  if (result_.interrupted) result_.code = ExitCode::kInterrupted;
  return {};
}

// The profile with what the embedder or the command line sets over it, and every plugin it
// names found and checked: all errors at once, before anything runs.
Status Session::Impl::load_profile() {
  profile_ = opts_.profile_path.empty()
                 ? read_profile_text(opts_.profile_text, "<profile>", diagnostics_)
                 : read_profile_file(opts_.profile_path, diagnostics_);
  LOUPE_TRY(apply_overrides(opts_, profile_.session, &result_.option_errors));
  if (opts_.on_record) plugins_.add_embedder_sink({opts_.on_record, opts_.on_flush});
  Status st = plugins_.resolve(profile_, opts_.extra_plugin_dirs, diagnostics_);
  for (const auto& d : diagnostics_) result_.profile_errors.push_back(d.str());
  return st;
}

Status Session::Impl::check_replay() {
  if (!profile_.session.command.empty() || profile_.session.pid)
    return session_error(ExitCode::kUsage, "a replay profiles no process: drop the command / pid");
  return recording_.open_replay();
}

// What every plugin host shares: the kernel's features, the symbolizer, the rings, the
// record bus, the links and the unwind tables.
void Session::Impl::make_services() {
  features_ = opts_.features ? opts_.features : std::make_shared<KernelFeatureProber>();
  SymbolizerOptions so;
  so.max_cached_processes = profile_.session.symbol_processes;
  // debuginfod as gdb, perf and elfutils use it: the servers the environment names.
  if (const char* urls = std::getenv("DEBUGINFOD_URLS")) so.debuginfod_urls = urls;
  symbolizer_ = make_symbolizer(so);
  ctx_.features = features_.get();
  ctx_.symbolizer = symbolizer_.get();
  ctx_.rings = &rings_;
  ctx_.bus = &bus_;
  ctx_.links = &links_;
  ctx_.walk = scope_.walk();
  ctx_.replay = recording_.replaying();
  install_libbpf_logging();
}

// loupe_session_info: what every plugin is told at setup. The session's window opens here.
void Session::Impl::describe_session() {
  const auto& s = profile_.session;
  session_start_wall_ = clock_ns(LOUPE_CLOCK_REALTIME);
  ctx_.window_start_ns = session_start_wall_;
  health_.session_started(session_start_wall_);
  info_.size = sizeof(info_);
  info_.duration_s = s.duration_s;
  info_.interval_s = s.interval_s;
  info_.output_dir = s.output_dir.c_str();
  info_.start_wall_ns = session_start_wall_;
  info_.rotate_s = s.rotate_s;
  window_open_wall_ = report_start_wall_ = session_start_wall_;
  info_.flags = recording_.replaying() ? LOUPE_SESSION_REPLAY : 0;
  scope_.describe(info_);
  const auto& names = plugins_.profiler_names();
  info_.profilers = names.empty() ? nullptr : names.data();
  info_.n_profilers = static_cast<std::uint32_t>(names.size());
}

Status Session::Impl::count_probes() {
  if (recording_.replaying() && !links_.results().empty())
    return session_error(ExitCode::kPlugin,
                         fmt::format("replay: a plugin attached {} probe(s) although the session "
                                     "has LOUPE_SESSION_REPLAY set (it must not load BPF in "
                                     "replay)",
                                     links_.results().size()));
  for (const auto& pr : links_.results())
    (pr.attached ? result_.probes_attached : result_.probes_failed)++;
  return {};
}

void Session::Impl::publish(const loupe_record& rec) {
  auto owned = std::make_shared<const OwnedRecord>(rec, "loupe", ctx_.window_start_ns.load(),
                                                   clock_ns(LOUPE_CLOCK_REALTIME));
  bus_.publish(owned);
}

void Session::Impl::run_loop() {
  const auto& s = profile_.session;
  const auto start = Clock::now();
  const auto end =
      s.duration_s > 0 ? start + Cadence::seconds(s.duration_s) : Clock::time_point::max();
  Cadence clocks(start);
  const auto report = clocks.every(Cadence::seconds(s.interval_s), Cadence::seconds(s.interval_s));
  // A window ends with an interval report of its own, whatever `interval` is: interval
  // stack records are deltas, so the window's files hold the window alone.
  const auto rotate = clocks.every(windows_ ? Cadence::seconds(s.rotate_s) : Clock::duration{},
                                   Cadence::seconds(s.rotate_s));
  // The budget is kept at a finer grain than reports: thinning reacts within seconds.
  const auto budget = clocks.every(budget_ ? std::chrono::seconds(1) : Clock::duration{}, {});
  // 20 ms while something happens; an idle system-wide session backs off to 100 ms (an
  // idle agent's wake-ups were most of its own cost).
  constexpr auto kTick = std::chrono::milliseconds(20), kIdleTick = std::chrono::milliseconds(100);
  auto tick = kTick;
  while (!stop_.load(std::memory_order_relaxed)) {
    auto now = Clock::now();
    if (now >= end) break;
    std::optional<int> exit_status;
    if (scope_.ended(&exit_status)) {
      if (exit_status) result_.target_exit_status = *exit_status;
      break;
    }
    tick = scope_.tick() ? std::min(tick + kTick, kIdleTick) : kTick;
    const auto due = clocks.due(now);
    if (Cadence::has(due, budget))
      budget_->tick(links_.program_stats(), clock_ns(LOUPE_CLOCK_MONOTONIC),
                    ProbeAccounting::self_cpu_ns(), clock_ns(LOUPE_CLOCK_REALTIME));
    if (Cadence::has(due, report) || Cadence::has(due, rotate)) {
      std::uint64_t window_end = clock_ns(LOUPE_CLOCK_REALTIME);
      report_window(report_start_wall_, window_end);
      if (Cadence::has(due, rotate)) end_window(window_end);
    }
    // Never past a deadline: reports, windows and the budget keep their times.
    std::this_thread::sleep_until(std::min({Clock::now() + tick, clocks.next(), end}));
  }
}

void Session::Impl::report_window(std::uint64_t window_start, std::uint64_t window_end) {
  ctx_.window_start_ns = window_start;
  ctx_.window_end_ns = window_end;
  plugins_.collect(false, window_start, window_end);
  emit_core_health(false);
  ctx_.window_end_ns = 0;
  plugins_.flush_sinks(std::chrono::seconds(5));
  report_start_wall_ = window_end;
}

// Every sink has consumed the window's last interval report (flush_sinks waited for it):
// each writes its files into the window's directory, which is then published whole.
void Session::Impl::end_window(std::uint64_t window_end) {
  WindowEnd w = windows_->begin(window_open_wall_, window_end);
  window_open_wall_ = window_end;
  if (w.dir.empty()) return;  // counted; the sinks' window state goes into the next one
  auto missing = plugins_.end_window(w, std::chrono::seconds(10));
  auto published = windows_->publish(w, missing);
  if (!published.empty())
    spdlog::info("window {} written{}", published.string(),
                 missing.empty() ? "" : fmt::format(" without {}", fmt::join(missing, ", ")));
}

void Session::Impl::configure_dispatch() {
  RingDispatcher::Options o;
  // The command line's bounds are checked with the other overrides, the profile's by its schema.
  o.max_delivery_delay = std::chrono::milliseconds(
      opts_.delivery_delay_ms ? static_cast<long>(*opts_.delivery_delay_ms)
                              : static_cast<long>(profile_.session.delivery_delay_ms));
  o.replay = recording_.replaying();
  rings_.configure(o);
  rings_.set_event_handler([this](const DispatchEvent& ev) {
    health_.dispatch_event(ev, clock_ns(LOUPE_CLOCK_REALTIME));
  });
}

void Session::Impl::emit_core_health(bool is_final) {
  health_.rings(rings_.stats(), rings_.take_coalesced(), is_final);
  if (windows_) health_.windows(windows_->counters(), windows_->root().string(), is_final);
  if (budget_) budget_->report(is_final);
  probes_.report(links_, is_final);
  if (!is_final) return;
  health_.final_failures(links_.results(), plugins_.profiler_health(), plugins_.sink_health(),
                         probes_.error());
}

Status Session::Impl::shutdown() {
  // The session's window ends when it was told to stop (its command exited, its duration
  // or a signal came), not after the detach and drain below, which take up to seconds
  // (each uprobe's unregister waits for an RCU grace period): ages, rates and shares in
  // the final report are as of the stop.
  const std::uint64_t stopped_wall = clock_ns(LOUPE_CLOCK_REALTIME);
  const double drain_s = profile_.session.drain_timeout_s;
  // Read before the detach closes the programs: with --stats every count, without them
  // still each program's recursion misses (events the kernel skipped, always counted).
  probes_.snapshot(links_);
  if (probes_.counting()) {
    result_.probe_stats = probes_.final_stats();
    result_.probes_attached_s = probes_.attached_s();
  }
  links_.detach_all();  // nothing new enters the rings from here on
  // The drain's time starts after the detach: under emulation the detach alone took the
  // whole default 2 s, and 9 of 10 outlier events still queued were abandoned.
  const auto deadline = Clock::now() + Cadence::seconds(drain_s);
  plugins_.stop_profilers(clock_ns(LOUPE_CLOCK_MONOTONIC) +
                          static_cast<std::uint64_t>(drain_s * 1e9));
  rings_.stop(deadline);
  recording_.finish(rings_);
  result_.records_recorded = recording_.recorded();
  // SIGTERM, the duration or the command's exit ends the current window too, with what the
  // rings held at the stop.
  if (windows_) {
    report_window(report_start_wall_, stopped_wall);
    end_window(stopped_wall);
  }
  ctx_.window_start_ns = session_start_wall_;
  ctx_.window_end_ns = stopped_wall;
  plugins_.collect(true, session_start_wall_, stopped_wall);
  scope_.drain();
  emit_core_health(true);
  scope_.report_health(health_);
  result_.records_published = bus_.published();
  LOUPE_TRY(plugins_.finish_sinks());
  plugins_.destroy();
  return {};
}

// Failed part-way: detach and free whatever was set up, flushing what sinks have. Sinks
// make their final report only when something reached them: a setup error must stand
// alone, not under an empty report (records 0, no health).
void Session::Impl::abort() {
  links_.detach_all();
  rings_.stop(Clock::now() + std::chrono::milliseconds(200));
  plugins_.abort(bus_.published() > 0);
  scope_.end(std::chrono::milliseconds(500));
}

}  // namespace loupe
