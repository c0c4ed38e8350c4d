// SPDX-License-Identifier: Apache-2.0
//
// The session's process tree: allocations of forked workers (a known number of 12,345-byte
// blocks each) are counted under each worker's pid, exactly; with --no-follow only the
// parent's. The libc uprobes are attached to every process mapping libc and filtered in
// BPF by the tree, so children are reached.
#include <gtest/gtest.h>

#include <map>
#include <string>

#include "tree_run.hpp"

namespace {

using loupe::test::kTreeParentN;
using loupe::test::kTreeWorkload;
using loupe::test::RunResult;
using nlohmann::json;

constexpr std::int64_t kBlock = 12345;

std::int64_t value(const json& rec, const std::string& name) {
  for (const auto& v : rec["stack"]["values"])
    if (v["name"] == name) return v["value"].get<std::int64_t>();
  return -1;
}

// Allocations of kBlock bytes per pid (the workload allocates nothing else of that size).
std::map<std::string, std::int64_t> blocks(const RunResult& r) {
  std::map<std::string, std::int64_t> out;
  for (const auto* rec : r.all("stack", "alloc_sites")) {
    std::int64_t n = value(*rec, "allocs"), bytes = value(*rec, "alloc_bytes");
    if (n > 0 && bytes == n * kBlock) out[(*rec)["labels"].value("pid", "")] += n;
  }
  return out;
}

class MemallocTree : public loupe::test::TreeRun {};

constexpr int kWorkers = 3, kN = 200;

TEST_F(MemallocTree, WorkersAllocationsExactlyPerPid) {
  const std::string body = "[[plugins]]\nname = \"memalloc\"\n";
  auto r = run(body, {kTreeWorkload, std::to_string(kWorkers), "malloc", std::to_string(kN)});
  ASSERT_EQ(r.exit_code, 0) << r.output;
  auto b = blocks(r);
  ASSERT_EQ(b.size(), static_cast<std::size_t>(kWorkers + 1)) << r.output;
  int workers = 0, parents = 0;
  for (const auto& [pid, n] : b) {
    workers += n == kN;
    parents += n == kTreeParentN;
  }
  EXPECT_EQ(workers, kWorkers);
  EXPECT_EQ(parents, 1);

  auto nf = run(body, {kTreeWorkload, std::to_string(kWorkers), "malloc", std::to_string(kN)},
                "--no-follow");
  ASSERT_EQ(nf.exit_code, 0) << nf.output;
  auto only = blocks(nf);
  ASSERT_EQ(only.size(), 1u);
  EXPECT_EQ(only.begin()->second, kTreeParentN);
}

TEST_F(MemallocTree, PidAttachSeesExistingAndLaterWorkers) {
  const std::string body = "[[plugins]]\nname = \"memalloc\"\n";
  auto r = run_pid(body, 2, 2, "malloc", kN);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  std::int64_t total = 0;
  for (const auto& [pid, n] : blocks(r)) total += n;
  EXPECT_EQ(total, 4 * kN + kTreeParentN) << r.output;
}

}  // namespace
