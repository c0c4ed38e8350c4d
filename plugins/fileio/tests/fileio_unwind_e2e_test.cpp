// SPDX-License-Identifier: Apache-2.0
//
// fileio's slow-event stacks under the default unwind ("tables", the in-kernel unwinder)
// through the CLI. A workload built without frame pointers reads and writes pipes straight
// from named sites and counts its own slow calls (tests/unwind/slow_calls_workload.c): every
// slow event must name exactly the site that made the call, as many times as the workload
// counted, with a stack that reaches the thread's root. The kernel's frame-pointer walk
// (unwind = "fp") is shown to lose the same callers, and Debian's dd and python3.11 under
// profiles/files.toml reach __libc_start_call_main.
#include <gtest/gtest.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <map>
#include <nlohmann/json.hpp>
#include <regex>
#include <sstream>
#include <string>

#include "cli_run.hpp"
#include "user_frames.hpp"

using loupe::test::UserFrames;
using nlohmann::json;

namespace {

struct Outcome {
  long events = 0, rooted = 0;
  std::map<std::string, long> got;  // "site.function" -> slow events
  std::map<std::string, std::string> examples;
};

class FileioUnwind : public loupe::test::CliRun {
 protected:
  // Pipes are not regular files: regular_only = false lets the workload's waits be events.
  Outcome run_mode(const std::string& unwind_line, loupe::test::SlowCalls* calls) {
    Outcome o;
    loupe::test::RunResult r =
        run("[[plugins]]\nname = \"fileio\"\nregular_only = false\nslow_us = 5000\n" + unwind_line,
            {SLOW_CALLS_WORKLOAD, "settle", "2000"});
    EXPECT_EQ(r.exit_code, 0) << r.output;
    *calls = loupe::test::SlowCalls(r.output);
    const long pid = calls->pid;
    EXPECT_GT(pid, 0) << r.output;
    // nanosleep is not a file call: only the reads and writes are the plugin's to report.
    for (auto* m : {&calls->slow, &calls->near})
      for (auto it = m->begin(); it != m->end();)
        it = it->first.find(".nanosleep") != std::string::npos ? m->erase(it) : std::next(it);
    for (const json* rec : loupe::test::events(r.records, "file_slow")) {
      const json& e = (*rec)["event"]["fields"];
      const json& frames = (*rec)["event"].value("frames", json::array());
      // The sites' calls are on threads; the main thread's are the loader's and stdio's.
      if (e.value("pid", 0L) != pid || e.value("tid", 0L) == pid) continue;
      const UserFrames u(frames);
      const std::string key = u.caller() + "." + e.value("op", "");
      ++o.got[key];
      ++o.events;
      o.rooted += u.reaches("start_thread");
      if (o.examples[key].empty() || !u.reaches("start_thread")) o.examples[key] = u.joined();
    }
    std::printf("  %s: %ld slow events, %ld reach start_thread\n",
                unwind_line.empty() ? "default" : unwind_line.c_str(), o.events, o.rooted);
    for (const auto& [key, n] : o.got)
      std::printf("    %-24s %3ld (workload %3ld, %ld near)  %s\n", key.c_str(), n,
                  calls->slow.count(key) ? calls->slow.at(key) : -1L,
                  calls->near.count(key) ? calls->near.at(key) : 0L, o.examples[key].c_str());
    return o;
  }
};

TEST_F(FileioUnwind, DefaultSlowEventStacksNameTheDirectCallerOfEveryCall) {
  loupe::test::SlowCalls calls("");
  Outcome o = run_mode("", &calls);
  calls.expect_matches(o.got, o.events);
  EXPECT_GE(o.got["slow_read_site.read"], 15);
  EXPECT_GE(o.got["slow_write_site.write"], 15);
  EXPECT_EQ(o.rooted, o.events);
}

TEST_F(FileioUnwind, FramePointersLoseTheDirectCaller) {
  loupe::test::SlowCalls calls("");
  const Outcome o = run_mode("unwind = \"fp\"\n", &calls);
  long named = 0;
  for (const auto& [key, n] : calls.slow)
    if (o.got.count(key)) named += o.got.at(key);
  ASSERT_GT(o.events, 30);
  EXPECT_LT(named, o.events / 10);
}

// profiles/files.toml's plugin section on Debian's dd and python3.11 (built without frame
// pointers), with slow_us = 1 so that their page-cache writes are events on any disk: the
// stacks of every call on the files they write reach __libc_start_call_main, but for stacks
// walked before the host had their process's tables, which the plugin counts. The calls
// come after a pause, as the host loads a process's tables once it runs (its first
// milliseconds are fp-only): dd opens its output at once, so its open is left out.
TEST_F(FileioUnwind, BundledProfileOnDebianBinariesReachesLibcStart) {
  for (const char* bin : {"/usr/bin/dd", "/usr/bin/python3.11"})
    if (!std::filesystem::exists(bin)) GTEST_SKIP() << bin << " is not installed";
  std::ifstream in(LOUPE_PROFILES_DIR "/files.toml");
  std::stringstream text;
  text << in.rdbuf();
  const std::string profile = text.str();
  const auto from = profile.find("[[plugins]]"), to = profile.find("[[sinks]]");
  ASSERT_NE(from, std::string::npos);
  const std::string body = std::regex_replace(profile.substr(from, to - from),
                                              std::regex("slow_us = [0-9]+"), "slow_us = 1");
  const std::string dd_out = dir_ + "/dd.out", py_out = dir_ + "/py.out";
  const std::string script = dir_ + "/run.sh";
  std::ofstream(script) << "(sleep 0.3; head -c 1048576 /dev/zero) | dd of=" << dd_out
                        << " bs=64k iflag=fullblock conv=fsync status=none\n"
                        << "python3.11 -c 'import os, time\ntime.sleep(2)\nf = open(\"" << py_out
                        << "\", \"wb\")\nfor _ in range(16): f.write(bytes(65536)); f.flush()\n"
                           "os.fsync(f.fileno())\nf.close()'\n";
  loupe::test::RunResult r = run(body, {"sh", script});
  ASSERT_EQ(r.exit_code, 0) << r.output;
  std::map<std::string, int> events, rooted;
  for (const json* rec : loupe::test::events(r.records, "file_slow")) {
    const json& e = (*rec)["event"]["fields"];
    const json& frames = (*rec)["event"].value("frames", json::array());
    const std::string path = e.value("path", ""), op = e.value("op", "");
    if (path != dd_out && path != py_out) continue;
    if (path == dd_out && op == "open") continue;
    const std::string comm = e.value("comm", "");
    const UserFrames u(frames);
    ++events[comm];
    rooted[comm] += u.reaches("__libc_start_call_main");
    if (!u.reaches("__libc_start_call_main") || events[comm] == 1)
      std::printf("  %-10s %-6s %s\n", comm.c_str(), op.c_str(), u.joined().c_str());
  }
  // A stack walked before the host had loaded its process's tables is counted as such
  // (unwind_fp_only_stacks): every other one reaches the root.
  const double fp_only = loupe::test::final_metric(r.records, "unwind_fp_only_stacks");
  int cut = 0;
  for (const char* comm : {"dd", "python3.11"}) {
    std::printf("  %s: %d of %d events reach __libc_start_call_main\n", comm, rooted[comm],
                events[comm]);
    EXPECT_GE(events[comm], 10) << comm;
    EXPECT_GE(rooted[comm], 10) << comm;
    cut += events[comm] - rooted[comm];
  }
  std::printf("  stacks walked without their process's tables: %.0f\n", fp_only);
  EXPECT_LE(cut, fp_only);
}

}  // namespace
