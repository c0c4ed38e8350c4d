// SPDX-License-Identifier: Apache-2.0
//
// The session's process tree: samples of forked workers (known CPU work each) are counted
// and attributed to each worker's pid and comm; with --no-follow they are filtered out.
#include <gtest/gtest.h>

#include <map>
#include <string>

#include "tree_run.hpp"
#include "user_frames.hpp"

namespace {

using loupe::test::frame_str;
using loupe::test::kTreeWorkload;
using loupe::test::RunResult;
using nlohmann::json;

std::int64_t samples_of(const json& rec) {
  for (const auto& v : rec["stack"]["values"])
    if (v["name"] == "samples") return v["value"].get<std::int64_t>();
  return 0;
}

// Samples per pid of the workers (comm tree_worker).
std::map<std::string, std::int64_t> worker_samples(const RunResult& r) {
  std::map<std::string, std::int64_t> out;
  for (const auto* rec : r.all("stack", "cpu"))
    if ((*rec)["labels"].value("comm", "") == "tree_worker")
      out[(*rec)["labels"].value("pid", "")] += samples_of(*rec);
  return out;
}

double metric(const RunResult& r, const std::string& name) {
  auto m = r.all("metric", name);
  return m.empty() ? -1 : (*m.back())["metric"]["value"].get<double>();
}

class CpuSampleTree : public loupe::test::TreeRun {};

constexpr int kWorkers = 3, kSpinMs = 600;

TEST_F(CpuSampleTree, WorkersSamplesCarryTheirOwnPidAndComm) {
  const std::string body = "[[plugins]]\nname = \"cpusample\"\n";
  auto r = run(body, {kTreeWorkload, std::to_string(kWorkers), "spin", std::to_string(kSpinMs)});
  ASSERT_EQ(r.exit_code, 0) << r.output;
  auto w = worker_samples(r);
  std::int64_t total = 0;
  for (const auto& [pid, n] : w) total += n;
  std::printf("  worker samples=%lld over %zu pids, filtered out=%.0f\n", (long long)total,
              w.size(), metric(r, "samples_filtered_out"));
  // 3 x 0.6 s of CPU at 99 Hz is ~178 samples on idle CPUs; a loaded box gives fewer, but
  // every worker spins long enough to be seen.
  EXPECT_EQ(w.size(), static_cast<std::size_t>(kWorkers)) << r.output;
  EXPECT_GE(total, 10);
  for (const auto& [pid, n] : w) EXPECT_GT(n, 0) << pid;

  auto nf = run(body, {kTreeWorkload, std::to_string(kWorkers), "spin", std::to_string(kSpinMs)},
                "--no-follow");
  ASSERT_EQ(nf.exit_code, 0) << nf.output;
  EXPECT_TRUE(worker_samples(nf).empty());
  EXPECT_GE(metric(nf, "samples_filtered_out"), 10);  // the workers' CPU, filtered out
}

TEST_F(CpuSampleTree, WorkersThatLive100msAreSymbolizedInTheFinalReport) {
  // Each worker spins 100 ms and exits, long before the report (the shell sleeps past the
  // symbolizer's grace for exited processes): their maps were never read while they
  // lived unless a sample was symbolized in time. The kernel's mmap/fork records give
  // them their parent's code at fork.
  const std::string body = "[[plugins]]\nname = \"cpusample\"\n";
  auto r = run(body, {"sh", "-c", "'" + kTreeWorkload + " 4 spin 100; sleep 3'"});
  ASSERT_EQ(r.exit_code, 0) << r.output;
  // A worker's sample is symbolized when the code it ran is named (its leaf user frame, the
  // vdso's caller when it was in the vdso):
  // most are in tree_spin, the rest in its fork and exit paths (libc, the kernel's return
  // to user space), which under emulation take a good share of a 100 ms life (35 of 39
  // samples in tree_spin, 6.12 guest beside another guest).
  std::int64_t total = 0, named = 0, spin = 0;
  std::map<std::string, std::int64_t> elsewhere;
  for (const auto* rec : r.all("stack", "cpu")) {
    if ((*rec)["labels"].value("comm", "") != "tree_worker") continue;
    std::int64_t n = samples_of(*rec);
    total += n;
    bool leaf_named = false, in_spin = false, any_user = false;
    std::string leaf;
    for (const auto& f : (*rec)["stack"]["frames"]) {
      if (f.value("kind", "") != "user") continue;
      const bool has = f.contains("symbol") && f["symbol"].is_string();
      // The vdso (clock_gettime, which tree_spin calls) has no file to be named from, for a
      // live process as for an exited one: its caller is the worker's code.
      if (!any_user && frame_str(f, "module") == "[vdso]") continue;
      if (!any_user) {
        leaf = has ? f["symbol"].get<std::string>() : "? " + frame_str(f, "module");
        leaf_named = has;
      }
      any_user = true;
      in_spin |= has && f["symbol"] == "tree_spin";
    }
    named += leaf_named ? n : 0;
    spin += in_spin ? n : 0;
    if (!in_spin || !leaf_named) elsewhere[leaf] += n;
  }
  std::string rest;
  for (const auto& [leaf, n] : elsewhere) rest += "\n    " + std::to_string(n) + " " + leaf;
  std::printf("  short-lived worker samples=%lld, leaf named=%lld, in tree_spin=%lld%s\n",
              (long long)total, (long long)named, (long long)spin, rest.c_str());
  ASSERT_GE(total, 4) << r.output;
  EXPECT_GE(named * 10, total * 9) << r.output;
  EXPECT_GE(spin * 2, total) << "the workers spin: most of their samples are in tree_spin";
}

}  // namespace
