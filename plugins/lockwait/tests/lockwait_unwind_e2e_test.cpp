// SPDX-License-Identifier: Apache-2.0
//
// lockwait's default user stacks (unwind = "tables", the in-kernel unwinder) end to end
// through the CLI: tests/unwind/direct_alloc_lock.c has 4 threads call pthread_mutex_lock
// straight from lock_site() and pthread_mutex_unlock straight from release_site(), built
// with and without frame pointers. The wait time on its lock under exactly the direct
// caller (the first user frame outside libc) must be the workload's own within 10 %, on
// stacks that reach start_thread, and the holder stacks must name release_site as the
// releaser; the kernel's frame-pointer walk from libc's futex call (unwind = "fp") skips
// both callers on both builds.
#include <gtest/gtest.h>

#include <cstdio>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <regex>
#include <string>
#include <vector>

#include "cli_run.hpp"
#include "user_frames.hpp"

namespace fs = std::filesystem;
using nlohmann::json;

namespace {

std::string workload_field(const std::string& output, const std::string& name) {
  std::smatch m;
  if (!std::regex_search(output, m, std::regex(name + "=(0x[0-9a-f]+|[0-9]+)"))) return "";
  return m[1];
}

double wait_ns(const json& rec) {
  for (const auto& v : rec["stack"]["values"])
    if (v["name"] == "wait_ns") return v["value"].get<double>();
  return 0;
}

struct Figures {
  double want_wait = 0;                    // the workload's own
  double hist = 0;                         // the lock's histogram
  double waited = 0, under_lock_site = 0;  // stack rows of the lock; under lock_site
  double rooted = 0;                       // ... reaching start_thread through worker
  double released = 0, by_release_site = 0;
  std::string wait_example, holder_example;
  std::string counters;  // the unwinder's and the table builder's, for a failure
};

class LockwaitUnwind : public loupe::test::CliRun {
 protected:
  // `mode` empty: the plugin's defaults, as a profile without an unwind key gets them.
  Figures run_mode(const char* workload, const std::string& mode) {
    Figures f;
    const std::string body = "[[plugins]]\nname = \"lockwait\"\nkernel = false\n" +
                             (mode.empty() ? std::string() : "unwind = \"" + mode + "\"\n");
    // 1.5 s asleep first: the session loads the process's tables once it runs.
    loupe::test::RunResult r = run(body, {workload, "1500"});
    EXPECT_EQ(r.exit_code, 0) << r.output;
    const std::string addr = workload_field(r.output, "lock_addr");
    const std::string want = workload_field(r.output, "lock_wait_ns");
    f.want_wait = want.empty() ? 0 : std::stod(want);
    f.counters = "\n    unwinder:" + loupe::test::unwind_counters(r.records);
    for (const json* h : r.all("histogram", "lock_wait"))
      if ((*h)["labels"].value("addr", "") == addr) f.hist = (*h)["histogram"]["sum"].get<double>();
    for (const json* rec : r.all("stack", "lock_wait")) {
      if ((*rec)["labels"].value("addr", "") != addr) continue;
      const loupe::test::UserFrames u((*rec)["stack"]["frames"]);
      const double ns = wait_ns(*rec);
      f.waited += ns;
      if (u.caller() == "lock_site") {
        f.under_lock_site += ns;
        if (u.reaches("worker") && u.reaches("start_thread"))
          f.rooted += ns;
        else if (f.wait_example.empty())
          f.wait_example = "(not rooted) " + u.joined();
      } else if (f.wait_example.empty()) {
        f.wait_example = "(caller " + u.caller() + ") " + u.joined();
      }
    }
    for (const json* rec : r.all("stack", "lock_holder")) {
      if ((*rec)["labels"].value("addr", "") != addr) continue;
      const loupe::test::UserFrames u((*rec)["stack"]["frames"]);
      f.released += wait_ns(*rec);
      if (u.caller() == "release_site" && u.reaches("lock_site"))
        f.by_release_site += wait_ns(*rec);
      else if (f.holder_example.empty())
        f.holder_example = "(caller " + u.caller() + ") " + u.joined();
    }
    std::printf(
        "  %s, unwind = %s: workload waited %.1f ms; g_lock %.1f ms, under lock_site %.1f ms "
        "(%.1f reach start_thread); ended by a wake %.1f ms, by release_site %.1f ms\n    %s\n"
        "    %s%s\n",
        fs::path(workload).filename().c_str(), mode.empty() ? "(default)" : mode.c_str(),
        f.want_wait / 1e6, f.hist / 1e6, f.under_lock_site / 1e6, f.rooted / 1e6, f.released / 1e6,
        f.by_release_site / 1e6, f.wait_example.c_str(), f.holder_example.c_str(),
        f.counters.c_str());
    return f;
  }

  void expect_right(const Figures& f) {
    ASSERT_GT(f.want_wait, 0);
    EXPECT_NEAR(f.under_lock_site, f.want_wait, 0.10 * f.want_wait) << f.wait_example << f.counters;
    EXPECT_NEAR(f.rooted, f.under_lock_site, 0.01 * f.under_lock_site)
        << f.wait_example << f.counters;
    // A wait may end without a wake (the lock came free before the thread slept), so not
    // all of it; but the releases of a contended mutex end most of it.
    EXPECT_GE(f.released, 0.8 * f.hist);
    EXPECT_GE(f.by_release_site, 0.9 * f.released) << f.holder_example << f.counters;
  }
};

TEST_F(LockwaitUnwind, DefaultNamesWaiterAndReleaserWithoutFramePointers) {
  expect_right(run_mode(UNWIND_ALLOC_LOCK_NOFP, ""));
}

TEST_F(LockwaitUnwind, DefaultNamesWaiterAndReleaserWithFramePointers) {
  expect_right(run_mode(UNWIND_ALLOC_LOCK_FP, ""));
}

// The overrides still load and run: dwarf names the waiter (it has no holder stacks of its
// own: those stay frame-pointer ones); fp's walk from libc's futex call skips the direct
// callers on both builds.
TEST_F(LockwaitUnwind, OverridesFpAndDwarf) {
  const Figures d = run_mode(UNWIND_ALLOC_LOCK_NOFP, "dwarf");
  EXPECT_NEAR(d.under_lock_site, d.want_wait, 0.10 * d.want_wait) << d.wait_example;
  for (const char* w : {UNWIND_ALLOC_LOCK_FP, UNWIND_ALLOC_LOCK_NOFP}) {
    const Figures f = run_mode(w, "fp");
    EXPECT_GT(f.hist, 0);
    EXPECT_LT(f.under_lock_site, 0.05 * f.want_wait) << f.wait_example;
    EXPECT_LT(f.by_release_site, 0.05 * f.released) << f.holder_example;
  }
}

}  // namespace
