// SPDX-License-Identifier: Apache-2.0
//
// The findings sink on real runs: what it says must name what the workload did, with
// numbers, and say nothing the rules do not support.
#include <gtest/gtest.h>

#include <fstream>
#include <sstream>
#include <string>

#include "cli_run.hpp"

namespace {

using loupe::test::RunResult;
using nlohmann::json;

class FindingsE2E : public loupe::test::CliRun {
 protected:
  std::string findings() {
    std::ifstream in(dir_ + "/out/findings.txt");
    std::stringstream ss;
    ss << in.rdbuf();
    return ss.str();
  }
};

TEST_F(FindingsE2E, NamesTheDominantFunctionOnAndOffTheCpu) {
  // 1 s spinning in spin_half, then 1 s asleep in sleep_half.
  RunResult r =
      run("[[plugins]]\nname = \"cpusample\"\n[[plugins]]\nname = \"offcpu\"\nwakers = false\n"
          "[[sinks]]\nname = \"findings\"\n",
          {OFFCPU_WORKLOAD, "halves"});
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const std::string f = findings();
  std::printf("%s", f.c_str());
  EXPECT_NE(f.find("of cpusample/cpu samples"), std::string::npos) << f;
  EXPECT_NE(f.find("is under spin_half"), std::string::npos) << f;
  EXPECT_NE(f.find("of offcpu/offcpu offcpu_ns"), std::string::npos) << f;
  // Off the CPU: sleep_half's 1 s asleep (in sleep_ms, which calls libc's clock_nanosleep
  // directly), plus spin_half's time preempted, which a busy machine (or an emulated guest)
  // makes as long. The rule names the function under at least half of the time, with its
  // direct caller: sleep_ms exactly when the run's own records put half or more of the
  // off-CPU time under it, never otherwise.
  double all = 0, asleep = 0;
  for (const auto& rec : r.records) {
    if (rec.value("kind", "") != "stack" || rec.value("name", "") != "offcpu" ||
        !rec.value("is_final", false))
      continue;
    double ns = 0;
    for (const auto& v : rec["stack"]["values"])
      if (v["name"] == "offcpu_ns") ns = v["value"].get<double>();
    all += ns;
    for (const auto& fr : rec["stack"]["frames"])
      if (fr.value("symbol", json()) == "sleep_ms") {
        asleep += ns;
        break;
      }
  }
  std::printf("  sleep_ms holds %.0f of %.0f ms off the CPU\n", asleep / 1e6, all / 1e6);
  ASSERT_GT(all, 0);
  if (asleep >= 0.5 * all)
    EXPECT_NE(f.find("called from sleep_ms"), std::string::npos) << f;
  else
    EXPECT_EQ(f.find("sleep_ms"), std::string::npos) << f;
}

TEST_F(FindingsE2E, ALatencyTailIsSaidWithItsNumbersAndAnEvenOneIsNot) {
  const std::string profile =
      "[[plugins]]\nname = \"latency\"\n  [[plugins.targets]]\n  syscall = \"clock_nanosleep\"\n"
      "[[sinks]]\nname = \"findings\"\n";
  // 95 sleeps of 1 ms and 5 of 100 ms: p99 is ~90x p50.
  RunResult tail = run(profile, {"sh", "-c",
                                 "'for i in $(seq 95); do sleep 0.001; done; "
                                 "for i in 1 2 3 4 5; do sleep 0.1; done'"});
  ASSERT_EQ(tail.exit_code, 0) << tail.output;
  const std::string t = findings();
  std::printf("%s", t.c_str());
  EXPECT_NE(t.find("long tail: latency/latency{"), std::string::npos) << t;
  EXPECT_NE(t.find("target=clock_nanosleep"), std::string::npos) << t;
  EXPECT_NE(t.find("100 values"), std::string::npos) << t;
  // 30 even sleeps: nothing to say about them.
  RunResult even = run(profile, {"sh", "-c", "'for i in $(seq 30); do sleep 0.01; done'"});
  ASSERT_EQ(even.exit_code, 0) << even.output;
  const std::string e = findings();
  EXPECT_EQ(e.find("long tail"), std::string::npos) << e;
}

}  // namespace
