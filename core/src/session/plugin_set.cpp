// SPDX-License-Identifier: Apache-2.0
#include "session/plugin_set.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <map>
#include <tuple>

#include "session/session_error.hpp"

namespace loupe {

ExitCode exit_code_for_plugin_status(int status) {
  switch (status) {
    case LOUPE_ERR_PERMISSION: return ExitCode::kPrivilege;
    case LOUPE_ERR_UNSUPPORTED:
    case LOUPE_ERR_NOT_FOUND:
    case LOUPE_ERR_KERNEL: return ExitCode::kKernel;
    case LOUPE_ERR_INVALID_ARG: return ExitCode::kProfile;
    default: return ExitCode::kRuntime;
  }
}

PluginSet::~PluginSet() = default;

Status PluginSet::resolve(Profile& profile, const std::vector<std::filesystem::path>& extra_dirs,
                          std::vector<Diagnostic>& diags) {
  profile_ = &profile;
  continue_on_error_ = profile.session.continue_on_plugin_error;
  auto dirs = extra_dirs;
  for (auto& d : PluginRegistry::default_search_dirs()) dirs.push_back(d);
  registry_ = std::make_unique<PluginRegistry>(dirs);
  registry_->set_allow_insecure(profile.session.allow_insecure_plugins);
  bool sink_listed = false;
  std::map<std::string, int> seen;
  // Every error of the profile at once, after those of [session] and of the profile's
  // shape: a misspelled plugin name must not hide the key errors of the plugins after it.
  // A missing or unloadable plugin outranks a bad key in the exit code.
  ExitCode code = ExitCode::kProfile;
  auto add_error = [&](ExitCode c, const SourcePos& pos, std::string msg) {
    if (c == ExitCode::kPlugin) code = c;
    diags.push_back({pos, std::move(msg)});
  };
  for (auto& spec : profile.plugins) {
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
      for (const auto& d : e.diagnostics()) diags.push_back(d);
      continue;
    }
    int n = seen[spec.name]++;
    instance_names_.back() = n == 0 ? spec.name : fmt::format("{}#{}", spec.name, n + 1);
    libs_.back() = lib;
  }
  if (!sink_listed && !embedder_.on_record)
    add_error(ExitCode::kProfile, SourcePos{profile.file},
              "the profile has no enabled [[sinks]]: results would go nowhere (add e.g. "
              "[[sinks]] name = \"console\")");
  for (std::size_t i = 0; i < profile.plugins.size(); ++i)
    if (libs_[i] && profile.plugins[i].kind == PluginSpec::Kind::kProfiler)
      profiler_names_.push_back(instance_names_[i].c_str());
  if (diags.empty()) return {};
  // In file order, as a compiler lists them ([session] is read before the plugins, but
  // may stand after them).
  std::stable_sort(diags.begin(), diags.end(), [](const auto& a, const auto& b) {
    return std::tie(a.pos.line, a.pos.column) < std::tie(b.pos.line, b.pos.column);
  });
  std::vector<std::string> lines;
  for (const auto& d : diags) lines.push_back(d.str());
  return session_error(code, fmt::format("{}", fmt::join(lines, "\n")));
}

Status PluginSet::start(HostContext& ctx, RecordBus& bus, loupe_session_info& info) {
  auto& plugins = profile_->plugins;
  for (std::size_t i = 0; i < plugins.size(); ++i)
    if (libs_[i] && plugins[i].kind == PluginSpec::Kind::kSink)
      if (Status st = setup(i, ctx, bus, info); !st) return st;
  if (embedder_.on_record)
    if (Status st = setup_embedder(ctx, bus, info); !st) return st;
  for (auto& sk : sinks_) {
    try {
      sk.instance->start();
    } catch (const HookError& e) {
      return session_error(ExitCode::kRuntime, e.what());
    }
    sk.runner->start();
  }
  for (std::size_t i = 0; i < plugins.size(); ++i)
    if (libs_[i] && plugins[i].kind == PluginSpec::Kind::kProfiler)
      if (Status st = setup(i, ctx, bus, info); !st) return st;
  for (auto& p : profilers_) {
    if (!p.instance->alive()) continue;
    try {
      p.instance->start();
    } catch (const HookError& e) {
      if (Status st = contain(p, e, "start"); !st) return st;
    }
  }
  return {};
}

Status PluginSet::setup(std::size_t index, HostContext& ctx, RecordBus& bus,
                        loupe_session_info& info) {
  Live live;
  live.host = std::make_unique<PluginHost>(ctx, instance_names_[index], libs_[index]->name());
  live.host->plugin_abi_minor = libs_[index]->descriptor().abi_minor;
  live.instance = std::make_unique<PluginInstance>(libs_[index], instance_names_[index]);
  loupe_setup_args args{sizeof(args), 0, &live.host->services,
                        profile_->plugins[index].config.get(), &info};
  info.instance_name = live.host->instance.c_str();  // valid during setup; plugins copy it
  try {
    live.instance->setup(args);
  } catch (const HookError& e) {
    return contain(live, e, "setup");
  }
  if (live.instance->is_sink()) {
    live.runner = std::make_unique<SinkRunner>(*live.instance);
    bus.attach(live.runner.get());
    sinks_.push_back(std::move(live));
  } else {
    profilers_.push_back(std::move(live));
  }
  return {};
}

Status PluginSet::setup_embedder(HostContext& ctx, RecordBus& bus, loupe_session_info& info) {
  const auto lib = embedder_sink_library();
  Live live;
  live.host = std::make_unique<PluginHost>(ctx, lib->name(), lib->name());
  live.instance = std::make_unique<PluginInstance>(lib, lib->name());
  loupe_setup_args args{sizeof(args), 0, &live.host->services, nullptr, &info};
  info.instance_name = live.host->instance.c_str();
  offer_embedder_callbacks(&live.host->services, std::move(embedder_));
  try {
    live.instance->setup(args);
  } catch (const HookError& e) {
    withdraw_embedder_callbacks(&live.host->services);
    return session_error(ExitCode::kRuntime, e.what());
  }
  live.runner = std::make_unique<SinkRunner>(*live.instance);
  bus.attach(live.runner.get());
  sinks_.push_back(std::move(live));
  return {};
}

Status PluginSet::contain(Live& live, const HookError& e, const char* phase) {
  if (!continue_on_error_) return session_error(exit_code_for_plugin_status(e.status()), e.what());
  spdlog::warn("{} (on_plugin_error = \"continue\": the session goes on without it)", e.what());
  loupe_health h{sizeof(h), LOUPE_HEALTH_ERROR, live.host->instance.c_str(), 1, e.what()};
  loupe_record r{};
  r.size = sizeof(r);
  r.kind = LOUPE_RECORD_HEALTH;
  std::string name = fmt::format("plugin_failed_{}", phase);
  r.name = name.c_str();
  r.health = &h;
  publish_(r);
  live.instance->destroy();
  return {};
}

void PluginSet::collect(bool is_final, std::uint64_t window_start, std::uint64_t window_end) {
  for (auto& p : profilers_)
    if (p.instance->alive()) collect_one(p, is_final, window_start, window_end);
}

// A plugin whose collect() fails is contained: the failure is logged and counted, the
// session goes on, and after kMaxCollectFailures failures in a row the plugin is disabled
// (no more collect(); its probes stay until the common detach) with a health record.
void PluginSet::collect_one(Live& p, bool is_final, std::uint64_t window_start,
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
    publish_(r);
  }
}

std::vector<std::string> PluginSet::thinnable() const {
  std::vector<std::string> out;
  for (const auto& p : profilers_)
    if (p.instance->alive() && !p.disabled && !p.refused_rate && p.instance->thinnable())
      out.push_back(p.host->instance);
  return out;
}

bool PluginSet::set_rate(const std::string& instance, std::uint32_t divisor, std::string* why) {
  for (auto& p : profilers_) {
    if (p.host->instance != instance) continue;
    try {
      p.instance->set_rate(divisor);
      return true;
    } catch (const HookError& e) {
      p.refused_rate = true;
      if (why) *why = e.what();
      return false;
    }
  }
  if (why) *why = "no live profiler instance '" + instance + "'";
  return false;
}

void PluginSet::flush_sinks(std::chrono::milliseconds timeout) {
  for (auto& sk : sinks_) sk.runner->flush(false, timeout);
}

std::vector<std::string> PluginSet::end_window(const WindowEnd& window,
                                               std::chrono::milliseconds timeout) {
  std::vector<std::string> missing;
  for (auto& sk : sinks_)
    if (!sk.runner->end_window(window, timeout)) missing.push_back(sk.host->instance);
  return missing;
}

void PluginSet::stop_profilers(std::uint64_t deadline_mono_ns) {
  for (auto& p : profilers_) {
    if (!p.instance->alive()) continue;
    try {
      p.instance->stop(deadline_mono_ns);
    } catch (const HookError& e) {
      spdlog::warn("{}", e.what());
    }
  }
}

Status PluginSet::finish_sinks() {
  std::string failures;
  for (auto& sk : sinks_) {
    if (!sk.runner->flush(true, std::chrono::seconds(10)))
      spdlog::warn("sink '{}' did not finish its final flush in time", sk.host->instance);
    sk.runner->stop();
    auto st = sk.runner->stats();
    if (st.consume_errors || st.disabled)
      failures += fmt::format("{}sink '{}' failed ({} errors{}): {}", failures.empty() ? "" : "; ",
                              sk.host->instance, st.consume_errors, st.disabled ? ", disabled" : "",
                              st.last_error);
  }
  if (!failures.empty()) return session_error(ExitCode::kRuntime, failures);
  return {};
}

void PluginSet::destroy() {
  for (auto& p : profilers_) p.instance->destroy();
  for (auto& sk : sinks_) sk.instance->destroy();
}

void PluginSet::abort(bool flush) {
  for (auto& p : profilers_) p.instance->destroy();
  for (auto& sk : sinks_) {
    if (sk.runner) {
      if (flush) sk.runner->flush(true, std::chrono::seconds(2));
      sk.runner->stop();
    }
    sk.instance->destroy();
  }
}

std::vector<ProfilerHealth> PluginSet::profiler_health() const {
  std::vector<ProfilerHealth> out;
  for (auto& p : profilers_)
    out.push_back({p.host->instance, p.collect_errors, p.disabled, p.host->rejected.load()});
  return out;
}

std::vector<SinkHealth> PluginSet::sink_health() const {
  std::vector<SinkHealth> out;
  for (auto& sk : sinks_) out.push_back({sk.host->instance, sk.runner->stats()});
  return out;
}

}  // namespace loupe
