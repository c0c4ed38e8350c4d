// SPDX-License-Identifier: Apache-2.0
//
// The profile's plugins and sinks as one set: found and checked before anything runs, then
// set up and started in the order that loses nothing (sinks first, so every record a
// profiler emits has somewhere to go), collected each window, stopped, flushed and
// destroyed. It applies the profile's on_plugin_error policy: a failing plugin either ends
// the session (its hook's status says how) or is contained, said in a health record
// through `publish`, and the session goes on without it.
#ifndef LOUPE_SESSION_PLUGIN_SET_HPP
#define LOUPE_SESSION_PLUGIN_SET_HPP

#include <chrono>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "dispatch/embedder_sink.hpp"
#include "dispatch/record_bus.hpp"
#include "dispatch/sink_runner.hpp"
#include "loupe/plugin_registry.hpp"
#include "plugins/plugin_instance.hpp"
#include "plugins/profile.hpp"
#include "session/budget_controller.hpp"
#include "session/health_report.hpp"
#include "session/plugin_host.hpp"
#include "util/result.hpp"

namespace loupe {

class PluginSet {
 public:
  using Publish = std::function<void(const loupe_record&)>;
  explicit PluginSet(Publish publish) : publish_(std::move(publish)) {}
  ~PluginSet();
  PluginSet(const PluginSet&) = delete;
  PluginSet& operator=(const PluginSet&) = delete;

  // Finds and loads every enabled plugin of `profile`, checks its kind and its keys against
  // its schema. Every error goes to `diags` (after those already there, then all sorted in
  // file order); the error returned says them all, kPlugin when a plugin is missing or
  // unloadable, else kProfile.
  Status resolve(Profile& profile, const std::vector<std::filesystem::path>& extra_dirs,
                 std::vector<Diagnostic>& diags);
  bool has_profilers() const { return !profiler_names_.empty(); }
  // Instance names of the profilers, for loupe_session_info.profilers (valid as long as
  // the set).
  const std::vector<const char*>& profiler_names() const { return profiler_names_; }

  // An in-process sink for the embedding program (SessionOptions::on_record), set up after
  // the profile's sinks as one more, named "embedder" (a profile may then list none).
  // Before resolve().
  void add_embedder_sink(EmbedderCallbacks callbacks) { embedder_ = std::move(callbacks); }
  // Sets up and starts every plugin, sinks first, with `info` (instance_name is filled for
  // each in turn). Sink runners are attached to `bus`.
  Status start(HostContext& ctx, RecordBus& bus, loupe_session_info& info);
  // A report window [start, end] (wall ns): every live profiler's collect().
  void collect(bool is_final, std::uint64_t window_start, std::uint64_t window_end);
  void flush_sinks(std::chrono::milliseconds timeout);
  // A window of a rotating session ended: every sink writes it into window.dir. Returns
  // the sinks that did not (their flush failed or timed out).
  std::vector<std::string> end_window(const WindowEnd& window, std::chrono::milliseconds timeout);
  // Probes are detached: each profiler drains what it holds by `deadline_mono_ns`.
  void stop_profilers(std::uint64_t deadline_mono_ns);
  // The final flush: every sink writes its report and stops. A sink that lost output makes
  // the run fail (kRuntime) though the others finished: a script must not mistake a
  // half-written report for a complete one.
  Status finish_sinks();
  void destroy();
  // A run that failed part-way: every plugin destroyed, sinks flushed first only when
  // `flush` (a setup error must stand alone, not under an empty report).
  void abort(bool flush);

  // The live profilers a budget can thin (ABI 1.9 set_rate), by instance name, in profile
  // order; one that refused once is not among them.
  std::vector<std::string> thinnable() const;
  // Asks `instance` to keep 1 in `divisor` of its events. False, with the plugin's reason
  // in *why, when it refused (then it is not asked again).
  bool set_rate(const std::string& instance, std::uint32_t divisor, std::string* why);
  // The two above, as the budget controller turns them.
  BudgetController::Knobs budget_knobs() {
    return {[this] { return thinnable(); },
            [this](const std::string& instance, std::uint32_t divisor, std::string* why) {
              return set_rate(instance, divisor, why);
            }};
  }

  std::size_t profiler_count() const { return profilers_.size(); }
  std::size_t sink_count() const { return sinks_.size(); }
  std::vector<ProfilerHealth> profiler_health() const;
  std::vector<SinkHealth> sink_health() const;

 private:
  // An instance with its host and, for a sink, its runner.
  struct Live {
    std::unique_ptr<PluginHost> host;
    std::unique_ptr<PluginInstance> instance;
    std::unique_ptr<SinkRunner> runner;
    std::uint64_t collect_errors = 0;  // every failed collect()
    std::uint32_t failed_in_a_row = 0;
    bool disabled = false;      // failed kMaxCollectFailures times in a row: no more collect()
    bool refused_rate = false;  // set_rate() failed: never thinned again
  };
  Status setup(std::size_t index, HostContext& ctx, RecordBus& bus, loupe_session_info& info);
  Status setup_embedder(HostContext& ctx, RecordBus& bus, loupe_session_info& info);
  Status contain(Live& live, const HookError& e, const char* phase);
  void collect_one(Live& p, bool is_final, std::uint64_t window_start, std::uint64_t window_end);

  Publish publish_;
  bool continue_on_error_ = false;
  Profile* profile_ = nullptr;
  std::unique_ptr<PluginRegistry> registry_;
  std::vector<std::shared_ptr<PluginLibrary>> libs_;  // parallel to profile_->plugins
  std::vector<std::string> instance_names_;           // parallel too
  std::vector<const char*> profiler_names_;
  std::vector<Live> sinks_, profilers_;
  EmbedderCallbacks embedder_;
};

}  // namespace loupe

#endif  // LOUPE_SESSION_PLUGIN_SET_HPP
