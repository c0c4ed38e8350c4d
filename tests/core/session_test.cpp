// The session lifecycle in-process, with the no-BPF test profiler and the jsonl sink.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <stdexcept>

#include "loupe/session.hpp"

namespace {

std::vector<nlohmann::json> read_jsonl(const std::string& path) {
  std::vector<nlohmann::json> out;
  std::ifstream in(path);
  for (std::string line; std::getline(in, line);)
    if (!line.empty()) out.push_back(nlohmann::json::parse(line));
  return out;
}

struct Run {
  loupe::SessionResult result;
  std::vector<nlohmann::json> records;
};

Run run_profile(const std::string& plugin_keys,
                const std::string& session_keys = "duration = 0.2\n",
                std::vector<std::string> command = {}) {
  std::string dir = ::testing::TempDir() + "/loupe-session-" + std::to_string(::getpid()) + "-" +
                    ::testing::UnitTest::GetInstance()->current_test_info()->name();
  std::filesystem::remove_all(dir);
  loupe::SessionOptions o;
  o.profile_text = "[session]\n" + session_keys + "output_dir = \"" + dir +
                   "\"\n[[plugins]]\nname = \"testprof\"\n" + plugin_keys +
                   "\n[[sinks]]\nname = \"jsonl\"\n";
  o.extra_plugin_dirs = {TEST_PLUGIN_DIR, LOUPE_BUILD_PLUGIN_DIR};
  o.command = std::move(command);
  loupe::Session s(std::move(o));
  Run r;
  r.result = s.run();
  r.records = read_jsonl(dir + "/records.jsonl");
  return r;
}

}  // namespace

TEST(Session, RunsPluginsAndDeliversFinalRecordsToSinks) {
  if (geteuid() != 0) GTEST_SKIP() << "needs root (the session checks BPF capabilities)";
  auto r = run_profile("count = 4\nmode = \"slow\"\n[[plugins.targets]]\nname = \"a\"\n");
  ASSERT_EQ(r.result.code, loupe::ExitCode::kOk) << r.result.error;
  int metrics = 0;
  for (auto& j : r.records) {
    if (j["kind"] != "metric") continue;
    ++metrics;
    EXPECT_EQ(j["plugin"], "testprof");
    EXPECT_EQ(j["labels"]["mode"], "slow");
    EXPECT_TRUE(j["is_final"].get<bool>());
    EXPECT_GE(j["metric"]["value"].get<double>(), 100.0);  // one target -> 100 + i
    EXPECT_GT(j["window"]["end_ns"].get<std::uint64_t>(),
              j["window"]["start_ns"].get<std::uint64_t>());
  }
  EXPECT_EQ(metrics, 4);
}

TEST(Session, IntervalReportsAreEmittedBeforeTheFinalOne) {
  if (geteuid() != 0) GTEST_SKIP() << "needs root";
  auto r = run_profile("count = 1\n", "duration = 0.7\ninterval = 0.2\n");
  ASSERT_EQ(r.result.code, loupe::ExitCode::kOk) << r.result.error;
  int interval = 0, final_ = 0;
  for (auto& j : r.records)
    if (j["kind"] == "metric") (j["is_final"].get<bool>() ? final_ : interval)++;
  EXPECT_GE(interval, 2);
  EXPECT_EQ(final_, 1);
}

TEST(Session, SetupFailureFailsTheRunOrIsContained) {
  if (geteuid() != 0) GTEST_SKIP() << "needs root";
  auto r = run_profile("fail_in = \"setup\"\n");
  EXPECT_EQ(r.result.code, loupe::ExitCode::kProfile);
  EXPECT_NE(r.result.error.find("asked to fail in setup"), std::string::npos) << r.result.error;
  r = run_profile("fail_in = \"start\"\n", "duration = 0.1\non_plugin_error = \"continue\"\n");
  EXPECT_EQ(r.result.code, loupe::ExitCode::kOk) << r.result.error;
  bool reported = false;
  for (auto& j : r.records)
    if (j["kind"] == "health" && j["name"] == "plugin_failed_start") reported = true;
  EXPECT_TRUE(reported) << "the contained failure must reach the sinks as a health record";
}

TEST(Session, EndsWhenTheProfiledCommandExits) {
  if (geteuid() != 0) GTEST_SKIP() << "needs root";
  auto start = std::chrono::steady_clock::now();
  auto r = run_profile("count = 1\n", "duration = 30\n", {"sh", "-c", "sleep 0.2; exit 3"});
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(10));
  EXPECT_EQ(r.result.code, loupe::ExitCode::kOk) << r.result.error;
  EXPECT_EQ(r.result.target_exit_status, 3);
}

TEST(Session, CommandThatCannotStartIsATargetError) {
  if (geteuid() != 0) GTEST_SKIP() << "needs root";
  auto r = run_profile("", "duration = 5\n", {"/nonexistent/binary"});
  EXPECT_EQ(r.result.code, loupe::ExitCode::kTarget);
  EXPECT_NE(r.result.error.find("No such file"), std::string::npos) << r.result.error;
}

TEST(Session, ValidationErrorsComeBeforeAnyPluginCode) {
  loupe::SessionOptions o;
  o.profile_text = "[[plugins]]\nname = \"testprof\"\ncount = 0\n[[sinks]]\nname = \"jsonl\"\n";
  o.extra_plugin_dirs = {TEST_PLUGIN_DIR, LOUPE_BUILD_PLUGIN_DIR};
  o.validate_only = true;
  auto r = loupe::Session(std::move(o)).run();
  EXPECT_EQ(r.code, loupe::ExitCode::kProfile);
  EXPECT_NE(r.error.find("<profile>:3:9"), std::string::npos) << r.error;
}

TEST(Session, UnknownPluginIsAPluginError) {
  loupe::SessionOptions o;
  o.profile_text = "[[plugins]]\nname = \"nosuch\"\n[[sinks]]\nname = \"jsonl\"\n";
  o.extra_plugin_dirs = {TEST_PLUGIN_DIR, LOUPE_BUILD_PLUGIN_DIR};
  o.validate_only = true;
  auto r = loupe::Session(std::move(o)).run();
  EXPECT_EQ(r.code, loupe::ExitCode::kPlugin);
  EXPECT_NE(r.error.find("<profile>:1:1"), std::string::npos) << r.error;
  EXPECT_NE(r.error.find("plugin 'nosuch' not found"), std::string::npos) << r.error;
}

TEST(Session, ProfileWithoutSinksIsRefused) {
  loupe::SessionOptions o;
  o.profile_text = "[[plugins]]\nname = \"testprof\"\n";
  o.extra_plugin_dirs = {TEST_PLUGIN_DIR};
  o.validate_only = true;
  auto r = loupe::Session(std::move(o)).run();
  EXPECT_EQ(r.code, loupe::ExitCode::kProfile);
  EXPECT_NE(r.error.find("no enabled [[sinks]]"), std::string::npos) << r.error;
}

// The embedding program's own sink: every record in process, the same as a file sink got,
// with no [[sinks]] needed; a slow callback loses records to its queue, counted, and the
// session still ends on time.
TEST(Session, OnRecordGetsEveryRecordInProcess) {
  if (geteuid() != 0) GTEST_SKIP() << "needs root";
  const std::string dir =
      ::testing::TempDir() + "/loupe-session-embed-" + std::to_string(::getpid());
  std::filesystem::remove_all(dir);
  loupe::SessionOptions o;
  o.profile_text = "[session]\nduration = 0.2\noutput_dir = \"" + dir +
                   "\"\n[[plugins]]\nname = \"testprof\"\ncount = 4\n[[sinks]]\nname = \"jsonl\"\n";
  o.extra_plugin_dirs = {TEST_PLUGIN_DIR, LOUPE_BUILD_PLUGIN_DIR};
  std::map<std::string, int> got;  // by kind; the sink's thread only, read after run()
  int flushes = 0, finals = 0;
  o.on_record = [&](const loupe_record& r) {
    got[r.kind == LOUPE_RECORD_METRIC   ? "metric"
        : r.kind == LOUPE_RECORD_HEALTH ? "health"
                                        : "other"]++;
  };
  o.on_flush = [&](bool is_final) {
    ++flushes;
    finals += is_final;
  };
  auto r = loupe::Session(std::move(o)).run();
  ASSERT_EQ(r.code, loupe::ExitCode::kOk) << r.error;
  std::map<std::string, int> file;
  for (auto& j : read_jsonl(dir + "/records.jsonl")) {
    const std::string k = j["kind"];
    file[k == "metric" || k == "health" ? k : "other"]++;
  }
  EXPECT_EQ(got["metric"], 4);
  EXPECT_EQ(got["metric"], file["metric"]);
  EXPECT_EQ(got["other"], file["other"]);
  EXPECT_EQ(finals, 1);
  EXPECT_GE(flushes, 1);

  // No [[sinks]] at all: the callback is the sink.
  const std::string no_sinks = "[session]\nduration = 0.2\noutput_dir = \"" + dir +
                               "\"\n[[plugins]]\nname = \"testprof\"\ncount = 2\n";
  loupe::SessionOptions bare;
  bare.profile_text = no_sinks;
  bare.extra_plugin_dirs = {TEST_PLUGIN_DIR, LOUPE_BUILD_PLUGIN_DIR};
  int metrics = 0;
  bare.on_record = [&](const loupe_record& rec) { metrics += rec.kind == LOUPE_RECORD_METRIC; };
  auto r2 = loupe::Session(std::move(bare)).run();
  ASSERT_EQ(r2.code, loupe::ExitCode::kOk) << r2.error;
  EXPECT_EQ(metrics, 2);

  // A callback that throws fails its records, counted as the sink's consume errors; the
  // session ends as it would.
  loupe::SessionOptions bad;
  bad.profile_text = no_sinks;
  bad.extra_plugin_dirs = {TEST_PLUGIN_DIR, LOUPE_BUILD_PLUGIN_DIR};
  bad.on_record = [](const loupe_record&) { throw std::runtime_error("no"); };
  auto r3 = loupe::Session(std::move(bad)).run();
  EXPECT_EQ(r3.code, loupe::ExitCode::kRuntime) << "a sink that failed its records lost output";
  EXPECT_NE(r3.error.find("sink 'embedder' failed"), std::string::npos) << r3.error;
  EXPECT_NE(r3.error.find("on_record threw: no"), std::string::npos) << r3.error;
  std::filesystem::remove_all(dir);
}
