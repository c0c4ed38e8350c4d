// SPDX-License-Identifier: Apache-2.0
#include "hotspot/jvm_perf_maps.hpp"

#include <fmt/format.h>
#include <spdlog/spdlog.h>
#include <sys/stat.h>

#include <algorithm>

#include "hotspot/jvm_attach.hpp"
#include "session/health_report.hpp"
#include "symbols/perf_map.hpp"

namespace loupe {
namespace {

using namespace std::chrono_literals;

// A JVM installs its SIGQUIT handler late in its start-up (hundreds of ms under load), and
// its attach listener can take longer than the attach bound to come up on a loaded machine
// (host beside two emulated guests: 1 JVM in 2 had none within 3 s). HotSpot's own client
// waits 10 s.
constexpr auto kReadyWithin = 10s;
constexpr auto kFirstInterval = 500ms;
constexpr auto kMaxInterval = 10s;
const std::string kCommand = "Compiler.perfmap";

double ms(std::chrono::microseconds us) {
  return static_cast<double>(us.count()) / 1000.0;
}

}  // namespace

void JvmPerfMaps::found(pid_t pid) {
  if (!enabled_) return;
  const auto now = Clock::now();
  if (jvms_.try_emplace(pid, Jvm{now, now, kFirstInterval, 0, 0, false, {}}).second)
    spdlog::debug("pid {} is a JVM: asking it for its perf map", pid);
}

void JvmPerfMaps::lost(pid_t pid) {
  // One that exec'd something else before answering was never a failure; one that
  // answered keeps its row.
  if (auto it = jvms_.find(pid); it != jvms_.end() && it->second.answers == 0) jvms_.erase(it);
}

void JvmPerfMaps::tick(const std::vector<pid_t>& processes) {
  if (!enabled_ || jvms_.empty()) return;
  const auto now = Clock::now();
  for (pid_t pid : processes)
    if (auto it = jvms_.find(pid);
        it != jvms_.end() && !it->second.done && now >= it->second.next_ask)
      ask(pid, it->second, now);
}

void JvmPerfMaps::ask(pid_t pid, Jvm& jvm, Clock::time_point now) {
  auto got = jvm_command(static_cast<std::uint32_t>(pid), kCommand);
  const auto after = Clock::now();
  if (got) {
    jvm.stale.clear();
    if (jvm.answers++ == 0) {
      jvm.first_ms = ms(got->took);
      spdlog::info("JVM pid {}: perf map written in {:.1f} ms{}{}", pid, jvm.first_ms,
                   got->started_listener ? " (its attach listener started)" : "",
                   got->through_helper ? " (as its owner)" : "");
    } else {
      spdlog::debug("JVM pid {}: perf map rewritten in {:.1f} ms", pid, ms(got->took));
    }
    jvm.next_ask = after + jvm.interval;
    jvm.interval = std::min<Clock::duration>(jvm.interval * 2, kMaxInterval);
    return;
  }
  const auto code = static_cast<JvmAttachError>(got.code());
  if (code == JvmAttachError::kGone) {
    jvm.done = true;
    return;
  }
  if (jvm.answers > 0) {  // the map it wrote stays; a later ask may answer (one exiting won't)
    jvm.stale = got.error();
    jvm.next_ask = after + jvm.interval;
    spdlog::debug("JVM pid {}: its perf map was not rewritten ({})", pid, jvm.stale);
    return;
  }
  if (now - jvm.found < kReadyWithin) {
    if (code == JvmAttachError::kNotReady) return;  // asked again next tick
    if (code == JvmAttachError::kTimeout) {         // a slow listener: again after a pause
      jvm.next_ask = after + jvm.interval;
      return;
    }
  }
  jvm.done = true;
  jvm.failure = got.error();
  spdlog::warn("JVM pid {}: no perf map ({}): its JIT frames stay unnamed", pid, jvm.failure);
}

// Per JVM asked: how often it wrote a map and how long the first took, or why it did not
// (WARN: its JIT frames stay [anon]); `stale`: why its last ask failed after a map was
// written (WARN: what it compiled since stays unnamed).
static void perf_map_health(HealthReport& health, std::uint32_t pid, std::uint64_t answers,
                            double first_ms, const std::string& failure, const std::string& stale) {
  const std::string comp = "jvm_perf_map";
  if (!failure.empty())
    health.health("jvm_perf_map_failed", comp, pid, LOUPE_HEALTH_WARN,
                  fmt::format("pid {}: {}; its JIT frames stay unnamed", pid, failure), true);
  else if (answers == 0)
    health.health(
        "jvm_perf_map_failed", comp, pid, LOUPE_HEALTH_WARN,
        fmt::format("pid {}: it did not catch SIGQUIT before it exited or the session ended "
                    "(a JVM still starting, or one started with -Xrs); its JIT frames stay "
                    "unnamed",
                    pid),
        true);
  else
    health.health("jvm_perf_map", comp, answers, LOUPE_HEALTH_OK,
                  fmt::format("pid {}: its perf map was written {} time(s) (Compiler.perfmap); the "
                              "first took {:.1f} ms",
                              pid, answers, first_ms),
                  true);
  if (answers > 0 && !stale.empty())
    health.health(
        "jvm_perf_map_stale", comp, pid, LOUPE_HEALTH_WARN,
        fmt::format("pid {}: its last ask failed ({}): methods it compiled after its perf "
                    "map was last written stay unnamed",
                    pid, stale),
        true);
}

void JvmPerfMaps::before_final_report(const std::vector<pid_t>& processes) {
  if (!enabled_) return;
  const auto now = Clock::now();
  for (pid_t pid : processes)
    if (auto it = jvms_.find(pid); it != jvms_.end() && !it->second.done) ask(pid, it->second, now);
}

void JvmPerfMaps::report_health(HealthReport& health) const {
  for (const auto& [pid, jvm] : jvms_)
    perf_map_health(health, static_cast<std::uint32_t>(pid), jvm.answers, jvm.first_ms, jvm.failure,
                    jvm.stale);
}

}  // namespace loupe
