// SPDX-License-Identifier: Apache-2.0
//
// offcpu's unwind = "tables" end to end through the CLI: a workload whose blocking calls come
// straight from sleep_site() (nanosleep) and read_site() (read), built with and without
// frame pointers (tests/unwind/direct_workload.c). The time under exactly the direct caller
// (the first user frame outside libc) must be the workload's own wall-minus-CPU time in that
// site within 5 %, with stacks that reach the thread's root; the kernel's frame-pointer walk
// (unwind = "fp") is shown to miss the same caller on the same binaries.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <nlohmann/json.hpp>
#include <regex>
#include <string>
#include <vector>

#include "cli_run.hpp"

using nlohmann::json;

namespace {

double workload_figure(const std::string& output, const std::string& name) {
  std::smatch m;
  if (!std::regex_search(output, m, std::regex(name + "=([0-9]+)"))) return -1;
  return std::stod(m[1]);
}

std::int64_t value(const json& rec, const std::string& name) {
  for (const auto& v : rec["stack"]["values"])
    if (v["name"] == name) return v["value"].get<std::int64_t>();
  return 0;
}

// The first user frame outside libc (the function that made the blocking call), and
// whether the user frames reach `root`.
struct UserStack {
  std::string caller;
  bool reaches(const std::string& root) const {
    for (const auto& s : symbols)
      if (s == root) return true;
    return false;
  }
  std::vector<std::string> symbols;
};

UserStack user_stack(const json& rec) {
  UserStack u;
  for (const auto& f : rec["stack"]["frames"]) {
    if (f.value("kind", "") != "user") continue;
    const std::string sym = f["symbol"].is_string() ? f["symbol"].get<std::string>() : "?";
    const std::string mod = f["module"].is_string() ? f["module"].get<std::string>() : "";
    u.symbols.push_back(sym);
    if (u.caller.empty() && mod.find("libc.so") == std::string::npos) u.caller = sym;
  }
  return u;
}

struct Figures {
  double want_sleep = 0, want_read = 0;      // the workload's own
  double sleep = 0, read = 0;                // under exactly that caller
  double sleep_rooted = 0, read_rooted = 0;  // ... and reaching main / start_thread
  std::string sleep_example, read_example;
};

class OffcpuUnwind : public loupe::test::CliRun {
 protected:
  Figures run_mode(const char* workload, const char* mode) {
    Figures f;
    loupe::test::RunResult r = run(
        std::string("[[plugins]]\nname = \"offcpu\"\nwakers = false\nunwind = \"") + mode + "\"\n",
        {workload, "settle", "2000"});
    EXPECT_EQ(r.exit_code, 0) << r.output;
    const std::string pid = std::to_string(static_cast<long>(workload_figure(r.output, "pid")));
    f.want_sleep = workload_figure(r.output, "sleep_off_ns");
    f.want_read = workload_figure(r.output, "read_off_ns");
    for (const json* rec : r.all("stack", "offcpu")) {
      if ((*rec)["labels"]["pid"] != pid) continue;
      const UserStack u = user_stack(*rec);
      const double ns = static_cast<double>(value(*rec, "offcpu_ns"));
      std::string joined;
      for (const auto& s : u.symbols) joined += s + ";";
      if (u.caller == "sleep_site") {
        f.sleep += ns;
        if (u.reaches("main")) f.sleep_rooted += ns;
        if (f.sleep_example.empty()) f.sleep_example = joined;
      } else if (u.caller == "read_site") {
        f.read += ns;
        if (u.reaches("start_thread")) f.read_rooted += ns;
        if (f.read_example.empty()) f.read_example = joined;
      }
      if (u.reaches("sleep_site") && u.caller != "sleep_site" && f.sleep_example.empty())
        f.sleep_example = "(caller lost) " + joined;
      if (u.reaches("read_site") && u.caller != "read_site" && f.read_example.empty())
        f.read_example = "(caller lost) " + joined;
    }
    std::printf(
        "  %s, unwind = %s: workload sleep %.1f ms, read %.1f ms; under the direct "
        "caller: sleep_site %.1f ms (%.1f reach main), read_site %.1f ms (%.1f reach "
        "start_thread)\n    %s\n    %s\n",
        workload, mode, f.want_sleep / 1e6, f.want_read / 1e6, f.sleep / 1e6, f.sleep_rooted / 1e6,
        f.read / 1e6, f.read_rooted / 1e6, f.sleep_example.c_str(), f.read_example.c_str());
    return f;
  }

  void expect_right(const Figures& f) {
    ASSERT_GT(f.want_sleep, 0);
    ASSERT_GT(f.want_read, 0);
    EXPECT_NEAR(f.sleep, f.want_sleep, 0.05 * f.want_sleep) << f.sleep_example;
    EXPECT_NEAR(f.read, f.want_read, 0.05 * f.want_read) << f.read_example;
    EXPECT_NEAR(f.sleep_rooted, f.sleep, 0.01 * f.sleep) << f.sleep_example;
    EXPECT_NEAR(f.read_rooted, f.read, 0.01 * f.read) << f.read_example;
  }
  // The frame-pointer walk on the same run: the direct caller is not there.
  void expect_fp_misses(const Figures& f) {
    EXPECT_LT(f.sleep, 0.05 * f.want_sleep) << f.sleep_example;
    EXPECT_LT(f.read, 0.05 * f.want_read) << f.read_example;
  }
};

TEST_F(OffcpuUnwind, TablesFindTheDirectCallerWithoutFramePointers) {
  expect_right(run_mode(UNWIND_WORKLOAD_NOFP, "tables"));
}

TEST_F(OffcpuUnwind, TablesFindTheDirectCallerWithFramePointers) {
  expect_right(run_mode(UNWIND_WORKLOAD_FP, "tables"));
}

TEST_F(OffcpuUnwind, FramePointersLoseTheDirectCallerOnBothBuilds) {
  expect_fp_misses(run_mode(UNWIND_WORKLOAD_FP, "fp"));
  expect_fp_misses(run_mode(UNWIND_WORKLOAD_NOFP, "fp"));
}

}  // namespace
