// SPDX-License-Identifier: Apache-2.0
//
// The SDK example plugin on the real kernel, through the CLI: a workload that makes
// exactly N getppid() and M getcwd() syscalls runs under `loupe run`; the jsonl report
// must count exactly N and M for it. A second copy of the workload spins on getppid() in
// the background the whole time, so a broken pid filter shows up as a count above N.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>
#include <string>
#include <vector>

namespace fs = std::filesystem;
using Json = nlohmann::json;

namespace {

constexpr unsigned long kGetppid = 1237;
constexpr unsigned long kGetcwd = 311;

std::string env_or_empty(const char* name) {
  const char* v = std::getenv(name);
  return v ? v : "";
}

std::string read_file(const fs::path& p) {
  std::ifstream in(p);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// A process doing getppid() in a loop until killed: system noise the filter must exclude.
class Noise {
 public:
  Noise() {
    pid_ = fork();
    if (pid_ == 0) {
      execl(SYSCOUNT_WORKLOAD, SYSCOUNT_WORKLOAD, "1000000000", "0", static_cast<char*>(nullptr));
      _exit(127);
    }
  }
  ~Noise() {
    if (pid_ > 0) {
      kill(pid_, SIGKILL);
      waitpid(pid_, nullptr, 0);
    }
  }
  Noise(const Noise&) = delete;
  Noise& operator=(const Noise&) = delete;

 private:
  pid_t pid_ = -1;
};

class SyscountTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (geteuid() != 0) GTEST_SKIP() << "needs root (loads BPF programs into the kernel)";
    loupe_ = env_or_empty("LOUPE_BIN");
    ASSERT_FALSE(loupe_.empty()) << "LOUPE_BIN is not set (run through ctest)";
    ASSERT_TRUE(fs::exists(loupe_)) << "loupe CLI not built: " << loupe_;
    dir_ = fs::temp_directory_path() /
           ("loupe-syscount-" + std::to_string(getpid()) + "-" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override {
    if (!dir_.empty() && !HasFailure()) fs::remove_all(dir_);
  }

  // Writes the profile, runs the workload under loupe, returns the final records.
  std::vector<Json> run(const std::string& plugin_table) {
    const fs::path profile = dir_ / "syscount.toml";
    const fs::path records = dir_ / "out" / "records.jsonl";  // the jsonl sink's default
    std::ofstream(profile) << "[session]\n"
                           << "duration = 0.0\n"
                           << "output_dir = \"" << (dir_ / "out").string() << "\"\n"
                           << "[[plugins]]\n"
                           << plugin_table << "\n"
                           << "[[sinks]]\n"
                           << "name = \"jsonl\"\n";
    const fs::path log = dir_ / "loupe.log";
    const std::string cmd = "timeout 60 '" + loupe_ + "' run '" + profile.string() + "' -- '" +
                            SYSCOUNT_WORKLOAD + "' " + std::to_string(kGetppid) + " " +
                            std::to_string(kGetcwd) + " >'" + log.string() + "' 2>&1";
    int rc = 0;
    {
      Noise noise;
      rc = std::system(cmd.c_str());
    }
    EXPECT_EQ(rc, 0) << cmd << "\n" << read_file(log);
    std::vector<Json> out;
    std::ifstream in(records);
    EXPECT_TRUE(in.good()) << "no " << records << "\n" << read_file(log);
    for (std::string line; std::getline(in, line);) {
      if (line.empty()) continue;
      Json j = Json::parse(line, nullptr, false);
      EXPECT_FALSE(j.is_discarded()) << "bad jsonl line: " << line;
      if (!j.is_discarded() && j.value("is_final", false) && j.value("plugin", "") == "syscount")
        out.push_back(std::move(j));
    }
    return out;
  }

  static std::vector<Json> named(const std::vector<Json>& recs, const std::string& name) {
    std::vector<Json> out;
    for (const Json& r : recs)
      if (r.value("name", "") == name) out.push_back(r);
    return out;
  }
  static double count_of(const std::vector<Json>& syscalls, const std::string& syscall) {
    double total = 0;
    for (const Json& r : syscalls)
      if (r["labels"].value("syscall", "") == syscall) total += r["metric"]["value"].get<double>();
    return total;
  }

  std::string loupe_;
  fs::path dir_;
};

TEST_F(SyscountTest, CountsExactlyTheTargetsSyscalls) {
  const auto recs = run("name = \"syscount\"\ntop = 0");
  const auto syscalls = named(recs, "syscalls");
  ASSERT_FALSE(syscalls.empty()) << "no final syscalls records";
  for (const Json& r : syscalls) {
    EXPECT_EQ(r["kind"], "metric");
    EXPECT_EQ(r["metric"]["type"], "counter");
    EXPECT_FALSE(r["labels"].contains("pid")) << "per_process is off by default";
  }
  EXPECT_EQ(count_of(syscalls, "getppid"), kGetppid);
  EXPECT_EQ(count_of(syscalls, "getcwd"), kGetcwd);
#if defined(__x86_64__)
  // A syscall newer than the build's headers is named all the same (not "sys_462").
  EXPECT_EQ(count_of(syscalls, "mseal"), 5u);
#endif
  // nr labels agree with the x86_64 table the names came from.
  for (const Json& r : syscalls) {
    if (r["labels"]["syscall"] == "getppid") {
      EXPECT_EQ(r["labels"]["nr"], "110");
    }
    if (r["labels"]["syscall"] == "getcwd") {
      EXPECT_EQ(r["labels"]["nr"], "79");
    }
  }
  // The workload also exits; exit_group is its last syscall.
  EXPECT_EQ(count_of(syscalls, "exit_group"), 1);

  const auto total = named(recs, "all_syscalls");
  ASSERT_EQ(total.size(), 1u);
  double sum = 0;
  for (const Json& r : syscalls) sum += r["metric"]["value"].get<double>();
  EXPECT_EQ(total[0]["metric"]["value"].get<double>(), sum) << "top = 0 emits every syscall";

  const auto dropped = named(recs, "dropped_map_full");
  ASSERT_EQ(dropped.size(), 1u);
  EXPECT_EQ(dropped[0]["health"]["value"], 0);
}

TEST_F(SyscountTest, LoadsByLibraryPathAndBreaksDownPerProcess) {
  const std::string plugin_dir = env_or_empty("LOUPE_PLUGIN_DIR");
  ASSERT_FALSE(plugin_dir.empty()) << "LOUPE_PLUGIN_DIR is not set (run through ctest)";
  const auto recs = run("name = \"syscount\"\nlibrary = \"" + plugin_dir +
                        "/loupe-syscount.so\"\nper_process = true\ntop = 3");
  const auto syscalls = named(recs, "syscalls");
  ASSERT_EQ(syscalls.size(), 3u) << "top = 3; the two loops are the workload's most frequent";
  std::set<std::string> pids;
  for (const Json& r : syscalls) pids.insert(r["labels"].value("pid", ""));
  EXPECT_EQ(pids.size(), 1u) << "only the target process passes the filter";
  EXPECT_EQ(count_of(syscalls, "getppid"), kGetppid);
  EXPECT_EQ(count_of(syscalls, "getcwd"), kGetcwd);
  // comm is taken when an entry is first counted; both loops run after exec, so it is the
  // workload's name cut to TASK_COMM_LEN - 1 bytes.
  for (const Json& r : syscalls) {
    const std::string sc = r["labels"].value("syscall", "");
    if (sc == "getppid" || sc == "getcwd") {
      EXPECT_EQ(r["labels"].value("comm", ""), std::string("syscount_workload").substr(0, 15));
    }
  }
}

}  // namespace
