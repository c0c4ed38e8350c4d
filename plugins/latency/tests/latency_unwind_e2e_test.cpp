// SPDX-License-Identifier: Apache-2.0
//
// latency's outlier stacks under the default unwind ("tables", the in-kernel unwinder)
// through the CLI. A workload built without frame pointers calls read, write and nanosleep
// straight from named sites and counts its own slow calls (tests/unwind/slow_calls_workload.c):
// every outlier must name exactly the site that made the call, as many times as the
// workload counted, with a stack that reaches the thread's root; at a uretprobe the leaf
// itself must be that site (the probed function has returned to it). The kernel's
// frame-pointer walk (unwind = "fp") is shown to lose the same callers, and Debian's own
// dd, sleep and python3.11 under profiles/latency.toml unchanged reach
// __libc_start_call_main.
#include <gtest/gtest.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>

#include "cli_run.hpp"
#include "user_frames.hpp"

using loupe::test::UserFrames;
using nlohmann::json;

namespace {

constexpr const char* kSyscallTargets =
    "[[plugins.targets]]\nname = \"read\"\nsyscall = \"read\"\n"
    "[[plugins.targets]]\nname = \"write\"\nsyscall = \"write\"\n"
    "[[plugins.targets]]\nname = \"nanosleep\"\nsyscall = \"clock_nanosleep\"\n";
constexpr const char* kLibcTargets =
    "[[plugins.targets]]\nname = \"read\"\nufunc = \"libc:read\"\n"
    "[[plugins.targets]]\nname = \"write\"\nufunc = \"libc:write\"\n"
    "[[plugins.targets]]\nname = \"nanosleep\"\nufunc = \"libc:nanosleep\"\n";

// The sites of the main thread reach main; the others their thread's start.
std::string root_of(const std::string& site) {
  return site == "settle" || site == "slow_sleep_site" ? "__libc_start_call_main" : "start_thread";
}

struct Outcome {
  long events = 0, rooted = 0;
  long sampled_out = 0;  // outliers skipped under ring backpressure, counted by the plugin
  std::map<std::string, long> got;              // "site.function" -> outliers
  std::map<std::string, std::string> examples;  // a stack per key, for failures
};

class LatencyUnwind : public loupe::test::CliRun {
 protected:
  // `leaf`: the site is the stack's leaf (a uretprobe) rather than the first frame outside
  // libc (a syscall inside a libc wrapper).
  Outcome run_targets(const std::string& unwind_line, const char* targets, bool leaf,
                      loupe::test::SlowCalls* calls) {
    Outcome o;
    loupe::test::RunResult r =
        run("[[plugins]]\nname = \"latency\"\noutlier_ns = 5000000\noutlier_stacks = true\n" +
                unwind_line + targets,
            {SLOW_CALLS_WORKLOAD, "settle", "2000"});
    EXPECT_EQ(r.exit_code, 0) << r.output;
    *calls = loupe::test::SlowCalls(r.output);
    for (const auto& rec : r.records)
      if (rec.value("kind", "") == "health" && rec.value("name", "") == "outliers_sampled_out" &&
          rec.value("is_final", false))
        o.sampled_out += rec["health"].value("value", 0L);
    const long pid = calls->pid;
    EXPECT_GT(pid, 0) << r.output;
    for (const json* rec : loupe::test::events(r.records, "outlier")) {
      const json& e = (*rec)["event"]["fields"];
      const json& frames = (*rec)["event"].value("frames", json::array());
      // The main thread's reads and writes are the loader's and stdio's, not the sites'.
      if (e.value("pid", 0L) != pid ||
          (e.value("tid", 0L) == pid && e.value("target", "") != "nanosleep"))
        continue;
      const UserFrames u(frames);
      const std::string site = leaf ? u.leaf() : u.caller();
      const std::string key = site + "." + e.value("target", "");
      ++o.got[key];
      ++o.events;
      o.rooted += u.reaches(root_of(site));
      if (o.examples[key].empty() || !u.reaches(root_of(site))) o.examples[key] = u.joined();
    }
    std::printf("  %s%s: %ld outliers, %ld reach their root\n", unwind_line.c_str(),
                leaf ? " (uretprobes)" : " (syscalls)", o.events, o.rooted);
    for (const auto& [key, n] : o.got)
      std::printf("    %-28s %3ld (workload %3ld, %ld near)  %s\n", key.c_str(), n,
                  calls->slow.count(key) ? calls->slow.at(key) : -1L,
                  calls->near.count(key) ? calls->near.at(key) : 0L, o.examples[key].c_str());
    return o;
  }

  // Every slow call the workload counted is an outlier under its own site, and no outlier
  // names any other function.
  void expect_every_site(const char* targets, bool leaf) {
    loupe::test::SlowCalls calls("");
    Outcome o = run_targets("", targets, leaf, &calls);
    calls.expect_matches(o.got, o.events, o.sampled_out);
    EXPECT_GE(o.got["slow_read_site.read"] + o.sampled_out, 15);
    EXPECT_GE(o.got["slow_write_site.write"] + o.sampled_out, 15);
    EXPECT_GE(o.got["slow_sleep_site.nanosleep"] + o.sampled_out, 15);
    EXPECT_EQ(o.rooted, o.events);
  }
};

// profiles/latency.toml's [[plugins]] section as shipped ("" when it has none).
std::string bundled_plugins() {
  std::ifstream in(LOUPE_PROFILES_DIR "/latency.toml");
  std::stringstream text;
  text << in.rdbuf();
  const std::string profile = text.str();
  const auto from = profile.find("[[plugins]]"), to = profile.find("[[sinks]]");
  return from == std::string::npos ? "" : profile.substr(from, to - from);
}

TEST_F(LatencyUnwind, DefaultOutlierStacksNameTheDirectCallerOfEverySyscall) {
  expect_every_site(kSyscallTargets, false);
}

// A uretprobe fires once the probed function has returned: the registers the unwinder starts
// from are its caller's, so the leaf is the site itself.
TEST_F(LatencyUnwind, DefaultOutlierStacksAtAUretprobeStartAtTheCaller) {
  expect_every_site(kLibcTargets, true);
}

// The explicit override keeps the old walk, which starts from the caller's frame pointer
// inside the frameless libc wrapper: on this binary it loses the site.
TEST_F(LatencyUnwind, FramePointersLoseTheDirectCaller) {
  loupe::test::SlowCalls calls("");
  const Outcome o = run_targets("unwind = \"fp\"\n", kSyscallTargets, false, &calls);
  long named = 0;
  for (const auto& [key, n] : calls.slow)
    if (o.got.count(key)) named += o.got.at(key);
  ASSERT_GT(o.events, 40);
  EXPECT_LT(named, o.events / 10);
}

// profiles/latency.toml's plugin section unchanged on Debian's dd, sleep and python3.11
// (built without frame pointers): every outlier's stack reaches __libc_start_call_main, but
// for stacks walked before the host had its process's tables, which the plugin counts.
TEST_F(LatencyUnwind, BundledProfileOnDebianBinariesReachesLibcStart) {
  for (const char* bin : {"/usr/bin/dd", "/usr/bin/sleep", "/usr/bin/python3.11"})
    if (!std::filesystem::exists(bin)) GTEST_SKIP() << bin << " is not installed";
  const std::string plugins = bundled_plugins();
  ASSERT_FALSE(plugins.empty());
  // Each call is slow (>= the profile's 10 ms) after the process has run a while, as the
  // host loads a process's tables once it runs (its first milliseconds are fp-only).
  const std::string script = dir_ + "/run.sh";
  std::ofstream(script)
      << "(sleep 0.3; echo x) | dd of=/dev/null bs=1 count=1 status=none\n"
         "python3.11 -c 'import time\ntime.sleep(2)\nfor _ in range(3): time.sleep(0.05)'\n";
  loupe::test::RunResult r = run(plugins, {"sh", script});
  ASSERT_EQ(r.exit_code, 0) << r.output;
  std::map<std::string, int> outliers, rooted;
  for (const json* rec : loupe::test::events(r.records, "outlier")) {
    const json& e = (*rec)["event"]["fields"];
    const json& frames = (*rec)["event"].value("frames", json::array());
    const std::string comm = e.value("comm", "");
    const UserFrames u(frames);
    ++outliers[comm];
    rooted[comm] += u.reaches("__libc_start_call_main");
    std::printf("  %-10s %-9s %s\n", comm.c_str(), e.value("target", "").c_str(),
                u.joined().c_str());
  }
  // A stack walked before the host had loaded its process's tables is counted as such
  // (unwind_fp_only_stacks), as is one the walk stopped for a reason it says (a page not
  // resident, a rule it does not follow): every other one reaches the root.
  const double fp_only = loupe::test::counted_cut_stacks(r.records);
  int cut = 0, all_rooted = 0;
  for (const char* comm : {"dd", "sleep", "python3.11"}) {
    std::printf("  %s: %d of %d outliers reach __libc_start_call_main\n", comm, rooted[comm],
                outliers[comm]);
    EXPECT_GE(outliers[comm], 1) << comm;
    cut += outliers[comm] - rooted[comm];
    all_rooted += rooted[comm];
  }
  // On a quiet machine each command's later outliers are rooted; beside two CPU hogs in an
  // emulated guest a short `sleep` may end before the session's tick built its tables (all
  // its stacks then counted below), so only the run as a whole must have rooted stacks.
  EXPECT_GE(all_rooted, 1);
  std::printf("  stacks cut and counted (no tables yet, or a stop said): %.0f\n", fp_only);
  EXPECT_LE(cut, fp_only);
}

// A stack deeper than an outlier event carries (LAT_STACK_DEPTH: 32 frames; Python frames
// make stacks deeper) is cut at its frame array, and said (unwind_event_cut): python3.11
// sleeps at the bottom of 40 nested calls, each a Python frame and a few native ones.
TEST_F(LatencyUnwind, AStackDeeperThanTheEventCarriesIsCountedCut) {
  if (!std::filesystem::exists("/usr/bin/python3.11")) GTEST_SKIP() << "no python3.11";
  const std::string plugins = bundled_plugins();
  ASSERT_FALSE(plugins.empty());
  const std::string script = dir_ + "/deep.py";
  std::ofstream(script) << "import time\n"
                           "def down(n):\n"
                           "    return time.sleep(0.05) if n == 0 else down(n - 1)\n"
                           "time.sleep(1)\n"
                           "for _ in range(5):\n"
                           "    down(40)\n";
  loupe::test::RunResult r = run(plugins, {"/usr/bin/python3.11", script});
  ASSERT_EQ(r.exit_code, 0) << r.output;
  int deep = 0, full = 0;  // outliers under down(); those whose 32 user frames are all taken
  for (const json* rec : loupe::test::events(r.records, "outlier")) {
    const json& frames = (*rec)["event"].value("frames", json::array());
    int downs = 0, user = 0;
    for (const auto& f : frames) {
      if (f.value("kind", "") == "kernel") continue;
      ++user;
      if (f.contains("symbol") && f["symbol"] == "down") ++downs;
    }
    full += user >= 32;
    deep += downs > 0;
  }
  double counted = 0;
  for (const auto& rec : r.records)
    if (rec.value("kind", "") == "health" && rec.value("is_final", false) &&
        rec["health"].value("component", "").find("/unwind_event_cut") != std::string::npos)
      counted += rec["health"].value("value", 0.0);
  std::printf("  outliers with down() frames: %d; with 32 user frames: %d; counted cut: %.0f\n",
              deep, full, counted);
  ASSERT_GE(deep, 5) << "the five sleeps under down() are outliers";
  EXPECT_GE(full, 5);
  EXPECT_GE(counted, 5) << "every sleep at depth 40 is cut at the event's 32 frames";
  EXPECT_LE(counted, static_cast<double>(full)) << "only events whose frames are all taken";
}

}  // namespace
