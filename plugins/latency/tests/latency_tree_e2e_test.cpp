// SPDX-License-Identifier: Apache-2.0
//
// The session's process tree through the CLI: exact syscall counts across forked workers,
// a shell pipeline (Debian's sh, xz and gzip, and the tree workload), --no-follow, and
// `--pid` on a parent that already has workers and forks more once the session runs.
#include <gtest/gtest.h>

#include <fstream>
#include <set>
#include <string>

#include "tree_run.hpp"

namespace {

using loupe::test::kTreeParentN;
using loupe::test::kTreeWorkload;
using loupe::test::RunResult;
using nlohmann::json;

const std::string kGetrusage =
    "[[plugins]]\nname = \"latency\"\nper_pid = true\nper_comm = true\n"
    "[[plugins.targets]]\nname = \"getrusage\"\nsyscall = \"getrusage\"\n";

double calls(const RunResult& r) {
  return loupe::test::sum_final(r, "metric", "calls", {{"target", "getrusage"}},
                                [](const json& j) { return j["metric"]["value"].get<double>(); });
}

// Per-pid histogram counts of the getrusage target: pid -> (comm, count).
std::map<std::string, std::pair<std::string, int>> per_pid(const RunResult& r) {
  std::map<std::string, std::pair<std::string, int>> out;
  for (const auto* rec : r.all("histogram", "latency")) {
    const auto& l = (*rec)["labels"];
    if (l.value("target", "") != "getrusage" || !l.contains("pid")) continue;
    out[l["pid"].get<std::string>()] = {l.value("comm", ""),
                                        (*rec)["histogram"]["count"].get<int>()};
  }
  return out;
}

double health(const RunResult& r, const std::string& name) {
  for (const auto* rec : r.all("health", name)) return (*rec)["health"]["value"].get<double>();
  return -1;
}

class LatencyTree : public loupe::test::TreeRun {};

constexpr int kWorkers = 4, kN = 50;

TEST_F(LatencyTree, ForkedWorkersCountedExactlyAndEachUnderItsOwnPid) {
  auto r =
      run(kGetrusage, {kTreeWorkload, std::to_string(kWorkers), "syscalls", std::to_string(kN)});
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_EQ(calls(r), kWorkers * kN + kTreeParentN) << r.output;
  auto pids = per_pid(r);
  int workers = 0;
  for (const auto& [pid, cc] : pids) {
    SCOPED_TRACE(pid + " " + cc.first);
    if (cc.first == "tree_worker") {
      ++workers;
      EXPECT_EQ(cc.second, kN);
    } else {
      EXPECT_EQ(cc.second, kTreeParentN);
    }
  }
  EXPECT_EQ(workers, kWorkers);
  EXPECT_EQ(pids.size(), static_cast<std::size_t>(kWorkers + 1));
  EXPECT_EQ(health(r, "process_tree_joined"), kWorkers);
  EXPECT_EQ(health(r, "process_tree_exited"), kWorkers + 1);  // the root too
  EXPECT_EQ(health(r, "process_tree_overflow"), 0);
}

TEST_F(LatencyTree, NoFollowSeesTheParentOnly) {
  auto r =
      run(kGetrusage, {kTreeWorkload, std::to_string(kWorkers), "syscalls", std::to_string(kN)},
          "--no-follow");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_EQ(calls(r), kTreeParentN);
  EXPECT_EQ(per_pid(r).size(), 1u);
  EXPECT_TRUE(r.all("health", "process_tree_joined").empty());
  // The profile key says the same.
  auto k =
      run(kGetrusage, {kTreeWorkload, std::to_string(kWorkers), "syscalls", std::to_string(kN)}, "",
          "follow = false\n");
  ASSERT_EQ(k.exit_code, 0) << k.output;
  EXPECT_EQ(calls(k), kTreeParentN);
}

// sh -c 'A | B' with A and B the tree workload: both sides and their workers, exactly;
// the shell itself makes no getrusage call, which --no-follow shows.
TEST_F(LatencyTree, ShellPipelineCountsBothSides) {
  const std::string cmd =
      "'" + kTreeWorkload + " 2 syscalls 5 | " + kTreeWorkload + " 1 syscalls 7 > /dev/null'";
  auto r = run(kGetrusage, {"/bin/sh", "-c", cmd});
  ASSERT_EQ(r.exit_code, 0) << r.output;
  auto only_sh = run(kGetrusage, {"/bin/sh", "-c", cmd}, "--no-follow");
  ASSERT_EQ(only_sh.exit_code, 0) << only_sh.output;
  EXPECT_EQ(calls(r), calls(only_sh) + (2 * 5 + kTreeParentN) + (1 * 7 + kTreeParentN));
}

// Debian's own binaries, not built here: xz and gzip under sh read and write through the
// pipe; with the tree both appear by comm, without it neither does.
TEST_F(LatencyTree, DebianXzGzipPipelineUnderSh) {
  if (!std::filesystem::exists("/usr/bin/xz") || !std::filesystem::exists("/bin/gzip"))
    GTEST_SKIP() << "xz or gzip not installed";
  const std::string data = dir_ + "/data.bin";
  {
    std::ofstream f(data, std::ios::binary);
    std::string chunk;
    for (int i = 0; i < 4096; ++i) chunk += static_cast<char>((i * 2654435761u) >> 13);
    for (int i = 0; i < 256; ++i) f << chunk;  // 1 MiB
  }
  const std::string body =
      "[[plugins]]\nname = \"latency\"\nper_comm = true\n"
      "[[plugins.targets]]\nname = \"read\"\nsyscall = \"read\"\n"
      "[[plugins.targets]]\nname = \"write\"\nsyscall = \"write\"\n";
  const std::string cmd = "'xz -c -T1 " + data + " | gzip -c > /dev/null'";
  auto comms = [](const RunResult& r) {
    std::set<std::string> out;
    for (const auto* rec : r.all("histogram", "latency"))
      if ((*rec)["labels"].contains("comm"))
        out.insert((*rec)["labels"]["comm"].get<std::string>());
    return out;
  };
  auto r = run(body, {"/bin/sh", "-c", cmd});
  ASSERT_EQ(r.exit_code, 0) << r.output;
  auto seen = comms(r);
  EXPECT_TRUE(seen.count("xz")) << r.output;
  EXPECT_TRUE(seen.count("gzip")) << r.output;
  auto only_sh = run(body, {"/bin/sh", "-c", cmd}, "--no-follow");
  ASSERT_EQ(only_sh.exit_code, 0) << only_sh.output;
  auto seen_sh = comms(only_sh);
  EXPECT_FALSE(seen_sh.count("xz"));
  EXPECT_FALSE(seen_sh.count("gzip"));
}

// --pid on a parent that already has 2 workers (seeded from /proc) and forks 2 more once
// the session runs (seen by the kernel side).
TEST_F(LatencyTree, PidAttachSeesExistingAndLaterChildren) {
  constexpr int kEarly = 2, kLate = 2, kCalls = 20;
  auto r = run_pid(kGetrusage, kEarly, kLate, "syscalls", kCalls);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_EQ(calls(r), (kEarly + kLate) * kCalls + kTreeParentN) << r.output;
  EXPECT_EQ(health(r, "process_tree_seeded"), 1 + kEarly);
  EXPECT_EQ(health(r, "process_tree_joined"), kLate);
  auto nf = run_pid(kGetrusage, kEarly, kLate, "syscalls", kCalls, "--no-follow");
  ASSERT_EQ(nf.exit_code, 0) << nf.output;
  EXPECT_EQ(calls(nf), kTreeParentN);
}

}  // namespace
