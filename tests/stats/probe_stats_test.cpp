// SPDX-License-Identifier: Apache-2.0
//
// `loupe run --stats` on the real kernel: a workload that makes a known number of
// syscalls runs under syscount (a raw_syscalls:sys_enter tracepoint, so every syscall on
// the machine runs it) and a latency target on acct(2), which nothing here calls. The
// kernel's run count of syscount's program must cover the workload's syscalls, its time
// per run must be positive, and the acct probes must be reported silent.
#include <gtest/gtest.h>

#include <unistd.h>
#include <cstdio>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

namespace fs = std::filesystem;
using Json = nlohmann::json;

namespace {

constexpr unsigned long kGetppid = 20000;
constexpr unsigned long kGetcwd = 500;

std::string read_file(const fs::path& p) {
  std::ifstream in(p);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

class ProbeStatsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (geteuid() != 0) GTEST_SKIP() << "needs root (loads BPF programs into the kernel)";
    const char* bin = std::getenv("LOUPE_BIN");
    ASSERT_TRUE(bin && fs::exists(bin)) << "LOUPE_BIN is not set or not built (run through ctest)";
    loupe_ = bin;
    dir_ = fs::temp_directory_path() /
           ("loupe-stats-" + std::to_string(getpid()) + "-" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override {
    if (!dir_.empty() && !HasFailure()) fs::remove_all(dir_);
  }

  // Runs the workload under the profile; returns every record of the jsonl sink.
  std::vector<Json> run(const std::string& session_extra, const std::string& flags) {
    const fs::path profile = dir_ / "stats.toml";
    std::ofstream(profile)
        << "[session]\nduration = 0.0\noutput_dir = \"" << (dir_ / "out").string() << "\"\n"
        << session_extra
        << "\n"
        // The classic tracepoint: its program and target names are what this test holds.
        << "[[plugins]]\nname = \"syscount\"\nmechanism = \"tracepoint\"\n"
        << "[[plugins]]\nname = \"latency\"\n[[plugins.targets]]\nsyscall = \"acct\"\n"
        << "[[sinks]]\nname = \"jsonl\"\n";
    const fs::path log = dir_ / "loupe.log";
    const std::string cmd = "timeout 60 '" + loupe_ + "' run " + flags + " '" + profile.string() +
                            "' -- '" + SYSCOUNT_WORKLOAD + "' " + std::to_string(kGetppid) + " " +
                            std::to_string(kGetcwd) + " >'" + log.string() + "' 2>&1";
    EXPECT_EQ(std::system(cmd.c_str()), 0) << cmd << "\n" << read_file(log);
    std::vector<Json> out;
    std::ifstream in(dir_ / "out" / "records.jsonl");
    for (std::string line; std::getline(in, line);)
      if (!line.empty()) out.push_back(Json::parse(line));
    return out;
  }

  static const Json* final_metric(const std::vector<Json>& recs, const std::string& name,
                                  const std::string& program) {
    for (const Json& r : recs)
      if (r.value("is_final", false) && r.value("name", "") == name &&
          r["labels"].value("program", "") == program)
        return &r;
    return nullptr;
  }
  static std::vector<std::string> silent(const std::vector<Json>& recs) {
    std::vector<std::string> out;
    for (const Json& r : recs)
      if (r.value("name", "") == "silent_probe" && r.value("plugin", "") == "loupe") {
        EXPECT_EQ(r["health"]["severity"], "ok") << "a probe that never ran lost nothing";
        out.push_back(r["health"]["component"]);
      }
    return out;
  }

  std::string loupe_;
  fs::path dir_;
};

TEST_F(ProbeStatsTest, CountsRunsAndTimeAndReportsSilentProbes) {
  const auto recs = run("", "--stats");
  const Json* runs = final_metric(recs, "probe_runs", "syscount_sys_enter");
  ASSERT_NE(runs, nullptr) << "no final probe_runs record for syscount's program";
  EXPECT_EQ(runs->at("plugin"), "loupe");
  EXPECT_EQ(runs->at("labels")["instance"], "syscount");
  EXPECT_EQ(runs->at("labels")["target"], "tracepoint:sys_enter");
  // The probe is system-wide: at least the workload's own syscalls ran it.
  EXPECT_GE(runs->at("metric")["value"].get<double>(), static_cast<double>(kGetppid + kGetcwd));
  const Json* avg = final_metric(recs, "probe_avg_ns", "syscount_sys_enter");
  ASSERT_NE(avg, nullptr);
  EXPECT_GT(avg->at("metric")["value"].get<double>(), 0);
  const Json* time = final_metric(recs, "probe_run_time", "syscount_sys_enter");
  ASSERT_NE(time, nullptr);
  EXPECT_GT(time->at("metric")["value"].get<double>(), 0);
  for (const char* name : {"probe_events_per_s", "probe_cpu_share"}) {
    const Json* m = final_metric(recs, name, "syscount_sys_enter");
    ASSERT_NE(m, nullptr) << name;
    EXPECT_GT(m->at("metric")["value"].get<double>(), 0) << name;
  }
  const Json* share = final_metric(recs, "probe_cpu_share", "syscount_sys_enter");
  EXPECT_LT(share->at("metric")["value"].get<double>(), 1.0);

  // Check 6: both acct probes never ran and say so; the busy one is not called silent.
  auto quiet = silent(recs);
  std::sort(quiet.begin(), quiet.end());
  ASSERT_EQ(quiet.size(), 2u) << recs.size() << " records";
  EXPECT_NE(quiet[0].find("latency/"), std::string::npos);
  EXPECT_NE(quiet[0].find("sys_enter_acct"), std::string::npos);
  EXPECT_NE(quiet[1].find("sys_exit_acct"), std::string::npos);  // each side names its event
  const Json* acct = final_metric(recs, "probe_runs", "lat_tp_entry");
  ASSERT_NE(acct, nullptr);
  EXPECT_EQ(acct->at("metric")["value"].get<double>(), 0);
}

TEST_F(ProbeStatsTest, ProfileKeyEnablesStatsAndNoStatsByDefault) {
  auto with_key = run("stats = true", "");
  EXPECT_NE(final_metric(with_key, "probe_runs", "syscount_sys_enter"), nullptr);
  EXPECT_EQ(silent(with_key).size(), 2u);
  auto without = run("", "");
  EXPECT_EQ(final_metric(without, "probe_runs", "syscount_sys_enter"), nullptr);
  EXPECT_TRUE(silent(without).empty());
}

}  // namespace

namespace {

// Runs `loupe bench --reps 2 --json` on `profile_text` (saved as NAME.toml); the parsed
// document, or a failed assertion naming the command and its log.
void bench_json(const fs::path& dir, const std::string& loupe, const std::string& name,
                const std::string& profile_text, Json* out) {
  const fs::path profile = dir / (name + ".toml"), json = dir / (name + ".json"),
                 log = dir / (name + ".log");
  std::ofstream(profile) << profile_text;
  const std::string cmd = "timeout 120 '" + loupe + "' bench --reps 2 --json '" + profile.string() +
                          "' >'" + json.string() + "' 2>'" + log.string() + "'";
  ASSERT_EQ(std::system(cmd.c_str()), 0) << cmd << "\n" << read_file(log);
  *out = Json::parse(read_file(json));
}

// `loupe bench` on a tiny profile: the JSON has the documented shape and every measured
// number is positive. No timing is asserted: only that each way of measuring produced one.
TEST_F(ProbeStatsTest, BenchReportsCostPerProbeAsJson) {
  Json j;
  bench_json(dir_, loupe_, "bench",
             "[[plugins]]\nname = \"syscount\"\n"
             "[[plugins]]\nname = \"latency\"\n[[plugins.targets]]\nsyscall = \"read\"\n"
             "[[sinks]]\nname = \"jsonl\"\n",
             &j);
  if (HasFatalFailure()) return;
  EXPECT_EQ(j["schema"], "loupe.bench/2");
  EXPECT_EQ(j["reps"], 2);
  EXPECT_GT(j["cpus"].get<int>(), 0);
  ASSERT_EQ(j["profilers"].size(), 2u);
  // Programs on every syscall (syscount's raw_syscalls) get the cheapest syscall and a
  // cached file read; latency's read target the read loop.
  const std::vector<std::pair<std::string, std::vector<std::string>>> expect = {
      {"syscount", {"getppid", "4 KiB pread of a cached file"}}, {"latency", {"read"}}};
  for (std::size_t i = 0; i < expect.size(); ++i) {
    const Json& p = j["profilers"][i];
    EXPECT_EQ(p["instance"], expect[i].first);
    EXPECT_FALSE(p.contains("error")) << p.dump();
    EXPECT_FALSE(p["probes"].empty());
    ASSERT_EQ(p["workloads"].size(), expect[i].second.size()) << p.dump(2);
    for (std::size_t k = 0; k < expect[i].second.size(); ++k) {
      const Json& w = p["workloads"][k];
      EXPECT_EQ(w["loop"], expect[i].second[k]);
      EXPECT_EQ(w["kind"], "syscall");
      EXPECT_GT(w["iterations"].get<double>(), 0);
      for (const char* way : {"none", "empty_program", "loupe"})
        for (const char* s : {"min", "median", "max"}) {
          const double v = w["ns_per_iteration"][way][s].get<double>();
          EXPECT_GT(v, 0) << way << "." << s;
        }
      for (const char* way : {"loupe", "empty_program"}) {
        const Json& b = w["bpf_stats_ns_per_iteration"][way];
        EXPECT_GT(b["min"].get<double>(), 0) << way;
        EXPECT_LE(b["min"].get<double>(), b["median"].get<double>());
        EXPECT_LE(b["median"].get<double>(), b["max"].get<double>());
      }
      EXPECT_TRUE(w["added_ns_per_iteration"].contains("vs_none"));
      EXPECT_TRUE(w["added_ns_per_iteration"].contains("vs_empty_program"));
      // Each iteration ran the profiler's programs at least once per hooked tracepoint.
      EXPECT_GE(w["program_runs_per_iteration"]["min"].get<double>(), 1.0);
    }
  }
  // latency's read target hooks sys_enter_read and sys_exit_read, both fired by the loop.
  EXPECT_EQ(j["profilers"][1]["workloads"][0]["hooks"].size(), 2u);
}

// Uprobes on libc functions are driven by a loop that calls them in loupe's own process;
// a uprobe on a function no loop calls is listed as skipped, with the reason.
TEST_F(ProbeStatsTest, BenchDrivesLibcUprobesAndSaysWhyOthersAreSkipped) {
  Json j;
  bench_json(dir_, loupe_, "bench_uprobe",
             "[[plugins]]\nname = \"latency\"\n"
             "[[plugins.targets]]\nufunc = \"libc:malloc\"\n"
             "[[plugins.targets]]\nufunc = \"libc:getpid\"\n"
             "[[sinks]]\nname = \"jsonl\"\n",
             &j);
  if (HasFatalFailure()) return;
  ASSERT_EQ(j["profilers"].size(), 1u);
  const Json& p = j["profilers"][0];
  ASSERT_EQ(p["workloads"].size(), 1u) << p.dump(2);
  const Json& w = p["workloads"][0];
  EXPECT_EQ(w["loop"], "malloc+free");
  EXPECT_EQ(w["kind"], "user call");
  ASSERT_EQ(w["hooks"].size(), 2u) << w.dump(2);  // malloc's uprobe and uretprobe
  for (const auto& h : w["hooks"])
    EXPECT_NE(h.get<std::string>().find("libc"), std::string::npos) << h;
  // The loop really fired both of the plugin's programs: at least one run each per iteration.
  EXPECT_GE(w["program_runs_per_iteration"]["min"].get<double>(), 2.0);
  EXPECT_GT(w["bpf_stats_ns_per_iteration"]["loupe"]["min"].get<double>(), 0);
  EXPECT_GT(w["bpf_stats_ns_per_iteration"]["empty_program"]["min"].get<double>(), 0);
  // getpid has no loop: both of its probes are skipped, each with the reason.
  int skipped_getpid = 0;
  for (const auto& s : p["skipped"])
    if (s["reason"].get<std::string>().find("no built-in loop calls the function") !=
        std::string::npos)
      ++skipped_getpid;
  EXPECT_EQ(skipped_getpid, 2) << p["skipped"].dump(2);
}

// Block tracepoints (biolat's tp_btf/raw_tp programs) are driven by O_DIRECT reads of a
// scratch file on a block device; where there is none, the probes are skipped saying so.
TEST_F(ProbeStatsTest, BenchDrivesBlockTracepointsWithDirectReads) {
  Json j;
  bench_json(dir_, loupe_, "bench_bio",
             "[[plugins]]\nname = \"biolat\"\n[[sinks]]\nname = \"jsonl\"\n", &j);
  if (HasFatalFailure()) return;
  ASSERT_EQ(j["profilers"].size(), 1u);
  const Json& p = j["profilers"][0];
  if (p["workloads"].empty()) {
    ASSERT_FALSE(p["skipped"].empty()) << p.dump(2);
    EXPECT_NE(p["skipped"][0]["reason"].get<std::string>().find("block device"), std::string::npos)
        << p.dump(2);
    GTEST_SKIP() << "no block device under /var/tmp or /tmp: " << p["skipped"][0]["reason"];
  }
  ASSERT_EQ(p["workloads"].size(), 1u) << p.dump(2);
  const Json& w = p["workloads"][0];
  EXPECT_EQ(w["kind"], "block I/O");
  // issue and complete always fire; insert too when the device queues through a scheduler.
  EXPECT_GE(w["hooks"].size(), 2u) << w.dump(2);
  for (const auto& h : w["hooks"])
    EXPECT_NE(h.get<std::string>().find("block_rq_"), std::string::npos) << h;
  EXPECT_GE(w["program_runs_per_iteration"]["min"].get<double>(), 2.0) << w.dump(2);
  EXPECT_GT(w["bpf_stats_ns_per_iteration"]["loupe"]["min"].get<double>(), 0);
  EXPECT_GT(w["bpf_stats_ns_per_iteration"]["empty_program"]["min"].get<double>(), 0);
}

}  // namespace
