// SPDX-License-Identifier: Apache-2.0
#include "session/privilege_plan.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <spdlog/spdlog.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "kernel/capabilities.hpp"
#include "loupe/features.hpp"
#include "session/session_error.hpp"

namespace loupe {

Status PrivilegePlan::check(bool loads_programs) const {
  if (!loads_programs) return {};
  auto missing = missing_capabilities();
  auto lacks = [&](const char* cap) {
    return std::find(missing.begin(), missing.end(), cap) != missing.end();
  };
  // CAP_SYS_ADMIN alone covers BPF and perf on every kernel; otherwise both are needed.
  if (!lacks("CAP_SYS_ADMIN") || (!lacks("CAP_BPF") && !lacks("CAP_PERFMON"))) return {};
  return session_error(ExitCode::kPrivilege,
                       fmt::format("missing capabilities: {} (need CAP_BPF and CAP_PERFMON, or "
                                   "CAP_SYS_ADMIN; run as root or grant them with setcap "
                                   "cap_bpf,cap_perfmon+ep)",
                                   fmt::join(missing, ", ")));
}

Status PrivilegePlan::prepare_user(const std::string& user, const std::string& output_dir) {
  if (user.empty()) return {};
  auto who = lookup_user(user);
  if (!who) return session_error(ExitCode::kUsage, fmt::format("--user: {}", who.error()));
  run_as_ = who.value();
  if (::chown(output_dir.c_str(), run_as_->uid, run_as_->gid) != 0)
    return session_error(ExitCode::kPrivilege,
                         fmt::format("--user {}: cannot hand the output directory {} over: {}",
                                     user, output_dir, std::strerror(errno)));
  return {};
}

Status PrivilegePlan::drop_after_attach(bool requested, bool signals_command) const {
  if (!requested && !run_as_) return {};
  auto keep = post_attach_capabilities({.signal_command = signals_command});
  if (Status st = drop_privileges(keep, run_as_); !st)
    return session_error(ExitCode::kPrivilege, st.error());
  std::string kept;
  for (int c : keep) kept += (kept.empty() ? "" : ", ") + capability_name(c);
  spdlog::info(
      "attached; dropped every capability but {}{}", kept,
      run_as_ ? fmt::format(", now running as {} (uid {})", run_as_->name, run_as_->uid) : "");
  return {};
}

}  // namespace loupe
