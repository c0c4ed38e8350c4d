// SPDX-License-Identifier: Apache-2.0
//
// The session's process tree: mutex contention inside forked workers (two threads each,
// one mutex) is reported under each worker's pid; with --no-follow it is not.
#include <gtest/gtest.h>

#include <set>
#include <string>

#include "tree_run.hpp"

namespace {

using loupe::test::kTreeWorkload;
using loupe::test::RunResult;

// Pids of the workers (comm tree_worker) with waits in their lock_wait stacks. Kernel
// locks shared across processes (keyed without a pid: no label) are not a worker's own.
std::set<std::string> waiting_pids(const RunResult& r) {
  std::set<std::string> out;
  for (const auto* rec : r.all("stack", "lock_wait")) {
    if ((*rec)["labels"].value("comm", "") != "tree_worker" ||
        (*rec)["labels"].value("pid", "").empty())
      continue;
    for (const auto& v : (*rec)["stack"]["values"])
      if (v["name"] == "waits" && v["value"].get<double>() > 0)
        out.insert((*rec)["labels"].value("pid", ""));
  }
  return out;
}

class LockwaitTree : public loupe::test::TreeRun {};

constexpr int kWorkers = 3, kN = 20;

TEST_F(LockwaitTree, WorkersContentionUnderTheirOwnPids) {
  const std::string body = "[[plugins]]\nname = \"lockwait\"\n";
  auto r = run(body, {kTreeWorkload, std::to_string(kWorkers), "lock", std::to_string(kN)});
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_EQ(waiting_pids(r).size(), static_cast<std::size_t>(kWorkers)) << r.output;
  auto nf = run(body, {kTreeWorkload, std::to_string(kWorkers), "lock", std::to_string(kN)},
                "--no-follow");
  ASSERT_EQ(nf.exit_code, 0) << nf.output;
  EXPECT_TRUE(waiting_pids(nf).empty());
}

}  // namespace
