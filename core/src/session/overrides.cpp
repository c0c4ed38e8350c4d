// SPDX-License-Identifier: Apache-2.0
#include "session/overrides.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "session/session_error.hpp"

namespace loupe {

Status apply_overrides(const SessionOptions& opts, SessionSpec& s,
                       std::vector<std::string>* errors) {
  auto seconds = [&](const char* flag, const char* key, const std::optional<double>& v) {
    if (!v) return;
    std::string why = check_session_seconds(key, *v);
    if (!why.empty()) errors->push_back(fmt::format("{}: {}", flag, why));
  };
  seconds("--duration", "duration", opts.duration_s);
  seconds("--interval", "interval", opts.interval_s);
  if (opts.pid && (*opts.pid <= 0 || *opts.pid > kMaxPid))
    errors->push_back(
        fmt::format("--pid: {} is not a process id (1 to {}; leave --pid out to "
                    "profile the whole system)",
                    *opts.pid, kMaxPid));
  if (opts.delivery_delay_ms && !(*opts.delivery_delay_ms >= 0 && *opts.delivery_delay_ms <= 10000))
    errors->push_back(
        fmt::format("--delivery-delay: {} is out of range [0, 10000] ms", *opts.delivery_delay_ms));
  if (opts.output_dir && opts.output_dir->empty()) errors->push_back("--output: must not be empty");
  if (!errors->empty())
    return session_error(ExitCode::kUsage, fmt::format("{}", fmt::join(*errors, "\n")));

  if (opts.duration_s) s.duration_s = *opts.duration_s;
  if (opts.interval_s) s.interval_s = *opts.interval_s;
  if (opts.pid) s.pid = *opts.pid;
  if (opts.follow) s.follow = *opts.follow;
  if (opts.output_dir) s.output_dir = *opts.output_dir;
  if (!opts.user.empty()) s.user = opts.user;
  s.allow_insecure_plugins |= opts.allow_insecure_plugins;
  if (!opts.command.empty()) s.command = opts.command;
  if (s.pid && !s.command.empty())
    return session_error(ExitCode::kUsage, "give either a pid or a command to profile, not both");
  return {};
}

}  // namespace loupe
