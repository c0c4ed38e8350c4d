// SPDX-License-Identifier: Apache-2.0
//
// USDT targets on a forking server (one process per connection, 1000 connections): per-site
// counts are exact whatever the number of processes that fired them, sites are named by
// function from the probed file (every backend has exited by the report), and a breakdown
// too small to keep every process counts exactly what it could not keep. And a probe on a
// binary the target never ran is said, with what the target ran.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>

#include <cstdio>
#include <filesystem>
#include <map>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

#include "cli_run.hpp"
#include "usdt_records.hpp"

using loupe::test::by_label;
using loupe::test::final_health;
using loupe::test::RunResult;
using loupe::test::total;
using nlohmann::json;

namespace {

const std::string kForking = USDT_FORK_WORKLOAD;
const std::string kWorkload = USDT_WORKLOAD;
constexpr int kConnections = 1000;

class LatencyUsdtFork : public loupe::test::CliRun {};

// The workload's own count of what its backends fired.
struct Fired {
  long children = -1, txn = -1, select = -1, update = -1;
};

Fired fired(const RunResult& r) {
  Fired f;
  auto at = r.output.find("children ");
  if (at == std::string::npos) return f;
  std::istringstream in(r.output.substr(at));
  std::string w;
  in >> w >> f.children >> w >> f.txn >> w >> f.select >> w >> f.update;
  return f;
}

// A loss's health record: present, WARN when it counted anything; its count.
long loss(const RunResult& r, const std::string& name, const std::string& target) {
  const json* h = final_health(r, name, target);
  EXPECT_NE(h, nullptr) << name << "\n" << r.output;
  if (!h) return -1;
  const long v = (*h)["health"]["value"].get<long>();
  EXPECT_EQ((*h)["health"]["severity"], v ? "warn" : "ok") << name;
  return v;
}

std::string targets(const std::string& extra) {
  return "[[plugins]]\nname = \"latency\"\n" + extra +
         "[[plugins.targets]]\nname = \"txn\"\nusdt_entry = \"" + kForking +
         ":loupe:txn__start\"\nusdt_exit = \"" + kForking +
         ":loupe:txn__commit\"\n"
         "[[plugins.targets]]\nname = \"stmt\"\nusdt = \"" +
         kForking + ":loupe:statement\"\nlabel_arg = 0\nlabel = \"value\"\n";
}

// Sites of `target` by name: each named by its function in the probed file.
std::map<std::string, long> sites(const RunResult& r, const std::string& target) {
  std::map<std::string, long> out;
  for (const auto& [site, rec] : by_label(r, "metric", "site_calls", target, "site")) {
    EXPECT_EQ((*rec)["labels"].value("module", ""), kForking) << site;
    const std::string fn = site.substr(0, site.find('+'));
    out[fn] += (*rec)["metric"]["value"].get<long>();
  }
  return out;
}

TEST_F(LatencyUsdtFork, ExactPerSiteCountsOfAThousandBackendsNamedByFunction) {
  auto r = run(targets(""), {kForking, std::to_string(kConnections)});
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const Fired f = fired(r);
  ASSERT_EQ(f.children, kConnections) << r.output;
  EXPECT_EQ(total(r, "calls", "txn"), f.txn);
  EXPECT_EQ(total(r, "matched", "txn"), f.txn);
  EXPECT_EQ(total(r, "calls", "stmt"), f.select + f.update);
  // Every backend's calls, at the site that fired them, named by the function holding it.
  auto txn = sites(r, "txn");
  EXPECT_EQ(txn, (std::map<std::string, long>{{"run_txn", f.txn}})) << r.output;
  auto stmt = sites(r, "stmt");
  EXPECT_EQ(stmt, (std::map<std::string, long>{{"run_select", f.select}, {"run_update", f.update}}))
      << r.output;
  for (const char* name : {"sites_lost", "site_unresolved"}) EXPECT_EQ(loss(r, name, "stmt"), 0);
  std::printf("  %ld backends: txn %ld, select %ld, update %ld (workload) = loupe\n", f.children,
              f.txn, f.select, f.update);
}

// breakdown_limit = 8: 8 of 1000 backends keep a histogram, 8 of 16 statement values keep a
// count; what did not fit is counted to the call (kept + lost = produced), and the per-site
// totals, which no breakdown bounds, stay exact.
TEST_F(LatencyUsdtFork, ATinyBreakdownCountsExactlyWhatItCouldNotKeep) {
  constexpr int kLimit = 8;
  auto r = run(targets("per_pid = true\nbreakdown_limit = " + std::to_string(kLimit) + "\n"),
               {kForking, std::to_string(kConnections)});
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const Fired f = fired(r);
  ASSERT_EQ(f.children, kConnections) << r.output;

  // Per process: histograms of the txn pair.
  long kept = 0;
  auto per_pid = by_label(r, "histogram", "latency", "txn", "pid");
  EXPECT_LE(per_pid.size(), static_cast<std::size_t>(kLimit));
  for (const auto& [pid, rec] : per_pid) kept += (*rec)["histogram"]["count"].get<long>();
  const long lost = loss(r, "breakdown_overflow", "txn");
  EXPECT_GT(lost, 0);
  EXPECT_NE(
      (*final_health(r, "breakdown_overflow", "txn"))["health"]["message"].get<std::string>().find(
          "breakdown_limit"),
      std::string::npos);
  EXPECT_EQ(kept + lost, f.txn) << "kept " << kept << " lost " << lost;

  // Per label value: counts of the statement probe.
  long kept_labels = 0;
  auto values = by_label(r, "metric", "calls", "stmt", "value");
  EXPECT_LE(values.size(), static_cast<std::size_t>(kLimit));
  for (const auto& [v, rec] : values) kept_labels += (*rec)["metric"]["value"].get<long>();
  const long labels_lost = loss(r, "label_overflow", "stmt");
  EXPECT_GT(labels_lost, 0);
  EXPECT_EQ(kept_labels + labels_lost + loss(r, "label_unreadable", "stmt"), f.select + f.update);

  EXPECT_EQ(sites(r, "txn"), (std::map<std::string, long>{{"run_txn", f.txn}}));
  EXPECT_EQ(sites(r, "stmt"),
            (std::map<std::string, long>{{"run_select", f.select}, {"run_update", f.update}}));
  std::printf("  txn: %ld in %zu per-pid histograms + %ld counted lost = %ld\n", kept,
              per_pid.size(), lost, f.txn);
  std::printf("  statements: %ld in %zu label counts + %ld counted lost = %ld\n", kept_labels,
              values.size(), labels_lost, f.select + f.update);
}

// The pyenv case: the target runs a python3 that is not the probed file (here a copy of the
// probed program: same notes, another file), so the probes never fire; the report says
// what the target ran and where the probes sit.
TEST_F(LatencyUsdtFork, AProbeOnABinaryTheTargetNeverRanIsAWarningNamingWhatItRan) {
  const std::string copy = dir_ + "/usdt_copy";
  std::filesystem::copy_file(kWorkload, copy);
  std::filesystem::permissions(copy, std::filesystem::perms::owner_all);
  auto r = run("[[plugins]]\nname = \"latency\"\n[[plugins.targets]]\nname = \"req\"\nusdt = \"" +
                   kWorkload + ":loupe:req__start\"\n",
               {copy, "4", "0"});
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_EQ(total(r, "calls", "req"), 0);
  const json* h = final_health(r, "unmapped_binary", "req");
  ASSERT_NE(h, nullptr) << r.output;
  EXPECT_EQ((*h)["health"]["severity"], "warn");
  const std::string why = (*h)["health"]["message"].get<std::string>();
  EXPECT_NE(why.find("ran " + copy), std::string::npos) << why;
  EXPECT_NE(why.find("sit on " + kWorkload + ", which no target process ran"), std::string::npos)
      << why;
  // A running process given by --pid: what it runs is read when the session starts.
  FILE* bg = popen((copy + " 100000 0 & echo $!").c_str(), "r");
  ASSERT_NE(bg, nullptr);
  int pid = 0;
  ASSERT_EQ(std::fscanf(bg, "%d", &pid), 1);
  pclose(bg);
  r = run("[[plugins]]\nname = \"latency\"\n[[plugins.targets]]\nname = \"req\"\nusdt = \"" +
              kWorkload + ":loupe:req__start\"\n",
          {}, "--pid " + std::to_string(pid), "duration = 0.5\n");
  kill(pid, SIGKILL);
  waitpid(pid, nullptr, 0);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  h = final_health(r, "unmapped_binary", "req");
  ASSERT_NE(h, nullptr) << r.output;
  EXPECT_NE((*h)["health"]["message"].get<std::string>().find("ran " + copy), std::string::npos)
      << (*h)["health"]["message"];
  // The same profile on the probed binary itself fires, and says nothing of the kind.
  r = run("[[plugins]]\nname = \"latency\"\n[[plugins.targets]]\nname = \"req\"\nusdt = \"" +
              kWorkload + ":loupe:req__start\"\n",
          {kWorkload, "4", "0"});
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_EQ(total(r, "calls", "req"), 4);
  EXPECT_EQ(final_health(r, "unmapped_binary", "req"), nullptr);
}

}  // namespace
