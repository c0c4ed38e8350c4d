// SPDX-License-Identifier: Apache-2.0
// `loupe bench PROFILE [--reps N] [--json]`: per-probe cost on this machine.
#include <iostream>
#include <stdexcept>

#include "commands.hpp"
#include "loupe/probe_bench.hpp"
#include "loupe/session.hpp"

namespace loupe::cli {

int cmd_bench(const CommonOptions& common, const BenchCliOptions& bench) {
  {  // profile and plugin errors first, with their own exit codes
    SessionOptions v;
    v.profile_path = bench.profile;
    v.validate_only = true;
    for (auto& d : common.plugin_dirs) v.extra_plugin_dirs.emplace_back(d);
    auto r = Session(std::move(v)).run();
    if (r.code != ExitCode::kOk) {
      print_error(r);
      return static_cast<int>(r.code);
    }
  }
  BenchOptions opts;
  opts.profile_path = bench.profile;
  opts.reps = bench.reps;
  for (auto& d : common.plugin_dirs) opts.extra_plugin_dirs.emplace_back(d);
  BenchReport report;
  try {
    report = run_probe_bench(opts);
  } catch (const std::exception& e) {
    std::cerr << "loupe: error: " << e.what() << "\n";
    return static_cast<int>(ExitCode::kRuntime);
  }
  std::cout << (bench.json ? report.json() + "\n" : report.text());
  for (const auto& p : report.profilers)
    if (!p.error.empty()) return static_cast<int>(ExitCode::kRuntime);
  return 0;
}

}  // namespace loupe::cli
