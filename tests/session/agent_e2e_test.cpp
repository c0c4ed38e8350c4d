// SPDX-License-Identifier: Apache-2.0
//
// What an always-on agent needs of a session, through the CLI on a real profiler.
//
// [session] rotate: cpusample samples cpu_spin, and every window's pprof, folded and jsonl
// files land in a directory of their own. What must hold whatever the
// machine's load: the windows are contiguous and add up to the session exactly (interval
// stack records are deltas, and the last window is taken after the probes are detached);
// none is seen half written; retain prunes the oldest; SIGTERM ends the last window.
//
// SIGHUP: the profile is read again and checked while the session runs; a bad one is refused
// with all its errors and the session goes on, a good one restarts the session with it.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "cli_run.hpp"

namespace loupe::test {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

constexpr const char* kCpusample =
    "[[plugins]]\nname = \"cpusample\"\nfrequency = 99\nuser_stacks = true\n"
    "[[sinks]]\nname = \"pprof\"\n[[sinks]]\nname = \"folded\"\n";

// The sum of a folded file's counts (0 when there is no file).
std::int64_t folded_total(const fs::path& file) {
  std::ifstream in(file);
  std::int64_t total = 0;
  for (std::string line; std::getline(in, line);) {
    auto sp = line.rfind(' ');
    if (sp != std::string::npos) total += std::stoll(line.substr(sp + 1));
  }
  return total;
}

struct Window {
  fs::path dir;
  json meta;  // window.json
};

// The published windows, oldest first; fails on anything half written left behind.
std::vector<Window> windows_of(const fs::path& out) {
  std::vector<Window> ws;
  for (const auto& e : fs::directory_iterator(out / "windows")) {
    const std::string name = e.path().filename().string();
    EXPECT_NE(name.front(), '.') << "a window left unpublished: " << e.path();
    if (name.front() == '.') continue;
    std::ifstream in(e.path() / "window.json");
    ws.push_back({e.path(), json::parse(in, nullptr, false)});
  }
  std::sort(ws.begin(), ws.end(), [](const Window& a, const Window& b) { return a.dir < b.dir; });
  return ws;
}

std::string shell(const std::string& cmd) {
  std::string out;
  FILE* p = ::popen((cmd + " 2>&1").c_str(), "r");
  char buf[4096];
  std::size_t n;
  while (p && (n = std::fread(buf, 1, sizeof(buf), p)) > 0) out.append(buf, n);
  if (p && ::pclose(p) != 0) out += "\n[failed]";
  return out;
}

const json* final_health(const RunResult& r, const std::string& name) {
  for (const json* h : r.all("health", name)) return h;
  return nullptr;
}

class AgentE2E : public CliRun {};

TEST_F(AgentE2E, WindowsAreContiguousAndAddUpToTheSession) {
  RunResult r = run(kCpusample, {CPU_SPIN_WORKLOAD, "3.5", "user"}, "", "rotate = 1\n");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const fs::path out = dir_ + "/out";
  auto ws = windows_of(out);
  // 3.5 s of the command: windows at 1, 2 and 3 s and the last at its exit (more when the
  // machine is slow to start it).
  ASSERT_GE(ws.size(), 4u) << r.output;
  std::int64_t windows_total = 0;
  std::uint64_t previous_end = 0;
  for (const auto& w : ws) {
    SCOPED_TRACE(w.dir.string());
    ASSERT_TRUE(w.meta.is_object());
    EXPECT_TRUE(w.meta["missing"].empty()) << w.meta.dump();
    const auto start = w.meta["start_ns"].get<std::uint64_t>();
    const auto end = w.meta["end_ns"].get<std::uint64_t>();
    EXPECT_LT(start, end);
    if (previous_end) {
      EXPECT_EQ(start, previous_end) << "windows must not overlap or leave gaps";
    }
    previous_end = end;
    windows_total += folded_total(w.dir / "cpu.folded");
    // The window's records: interval ones only, each stack's inside the window.
    std::ifstream in(w.dir / "records.jsonl");
    int stacks = 0;
    for (std::string line; std::getline(in, line);) {
      json rec = json::parse(line);
      EXPECT_FALSE(rec.value("is_final", true)) << line;
      if (rec.value("kind", "") != "stack") continue;
      ++stacks;
      EXPECT_GE(rec["window"]["start_ns"].get<std::uint64_t>(), start) << line;
      EXPECT_LE(rec["window"]["end_ns"].get<std::uint64_t>(), end) << line;
    }
    EXPECT_EQ(stacks > 0, fs::exists(w.dir / "cpu.pb.gz"));
  }
  const std::int64_t session_total = folded_total(out / "cpu.folded");
  std::printf("  %zu windows: %lld samples in all, the session's file %lld\n", ws.size(),
              static_cast<long long>(windows_total), static_cast<long long>(session_total));
  EXPECT_GT(session_total, 0) << r.output;
  EXPECT_EQ(windows_total, session_total);

  // The busiest window's profile as pprof reads it.
  const Window* busiest = &ws.front();
  for (const auto& w : ws)
    if (folded_total(w.dir / "cpu.folded") > folded_total(busiest->dir / "cpu.folded"))
      busiest = &w;
  if (std::system("command -v go >/dev/null 2>&1") == 0) {
    const std::string top = shell("go tool pprof -top " + (busiest->dir / "cpu.pb.gz").string());
    EXPECT_EQ(top.find("[failed]"), std::string::npos) << top;
    EXPECT_NE(top.find("cpu_spin_inner"), std::string::npos) << top;
  }

  const json* written = final_health(r, "windows");
  ASSERT_NE(written, nullptr) << r.output;
  EXPECT_EQ((*written)["health"]["value"].get<std::size_t>(), ws.size()) << written->dump();
  const json* incomplete = final_health(r, "windows_incomplete");
  ASSERT_NE(incomplete, nullptr);
  EXPECT_EQ((*incomplete)["health"]["value"].get<int>(), 0) << incomplete->dump();
}

// As a service manager stops the agent: SIGTERM ends the current window, written like the
// others; retain keeps the newest two.
TEST_F(AgentE2E, SigtermEndsTheLastWindowAndRetainKeepsTheNewest) {
  launcher_ = "timeout --preserve-status -s TERM 5.5 ";
  RunResult r = run(kCpusample, {CPU_SPIN_WORKLOAD, "60", "user"}, "", "rotate = 1\nretain = 2\n");
  EXPECT_EQ(r.exit_code, 130) << r.output;  // interrupted, report written
  auto ws = windows_of(dir_ + "/out");
  ASSERT_EQ(ws.size(), 2u) << r.output;
  const json* written = final_health(r, "windows");
  ASSERT_NE(written, nullptr) << r.output;
  const auto n = (*written)["health"]["value"].get<std::size_t>();
  EXPECT_GE(n, 4u) << written->dump();
  EXPECT_NE((*written)["health"]["message"].get<std::string>().find(std::to_string(n - 2) +
                                                                    " removed by retain"),
            std::string::npos)
      << written->dump();
  // The last window ends where the final report does: at the stop.
  std::uint64_t final_end = 0;
  for (const auto& rec : r.records)
    if (rec.value("kind", "") == "stack" && rec.value("is_final", false))
      final_end = rec["window"]["end_ns"].get<std::uint64_t>();
  const auto last_end = ws.back().meta["end_ns"].get<std::uint64_t>();
  EXPECT_EQ(last_end, final_end);
  EXPECT_GT(folded_total(ws.back().dir / "cpu.folded"), 0)
      << "the window SIGTERM ended has the samples since the previous one";
}

std::string read_all(const std::string& path) {
  std::ifstream in(path);
  return std::string((std::istreambuf_iterator<char>(in)), {});
}

// Waits up to `seconds` for `text` to appear `times` times in the file.
bool wait_for(const std::string& path, const std::string& text, int times, double seconds) {
  for (int i = 0; i < seconds * 20; ++i) {
    const std::string log = read_all(path);
    int n = 0;
    for (auto at = log.find(text); at != std::string::npos; at = log.find(text, at + 1)) ++n;
    if (n >= times) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  return false;
}

int final_records(const std::string& jsonl) {
  std::ifstream in(jsonl);
  int n = 0;
  for (std::string line; std::getline(in, line);)
    n += json::parse(line, nullptr, false).value("is_final", false);
  return n;
}

TEST_F(AgentE2E, SighupRefusesABadProfileAndRestartsWithAGoodOne) {
  const std::string profile = dir_ + "/agent.toml", log = dir_ + "/loupe.log";
  auto write_profile = [&](const std::string& jsonl_path) {
    std::ofstream(profile) << "[session]\noutput_dir = \"" << dir_ << "/out\"\n"
                           << "[[plugins]]\nname = \"cpusample\"\nfrequency = 49\n"
                           << "[[sinks]]\nname = \"jsonl\"\npath = \"" << jsonl_path << "\"\n";
  };
  write_profile("first.jsonl");
  pid_t pid = ::fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    const std::string cmd =
        "exec " + loupe_ + " -v run " + profile + " --reloadable > " + log + " 2>&1";
    ::execl("/bin/sh", "sh", "-c", cmd.c_str(), static_cast<char*>(nullptr));
    ::_exit(127);
  }
  auto finish = [&] {
    ::kill(pid, SIGKILL);
    ::waitpid(pid, nullptr, 0);
  };
  if (!wait_for(log, "session running", 1, 120)) {
    finish();
    FAIL() << read_all(log);
  }
  // Two errors at once, each with its place; the session goes on.
  std::ofstream(profile) << "[session]\nintervall = 1\n[[plugins]]\nname = \"cpusample\"\n"
                         << "frequency = \"fast\"\n[[sinks]]\nname = \"jsonl\"\n";
  ::kill(pid, SIGHUP);
  const bool refused = wait_for(log, "refused, the running profile stays", 1, 60);
  EXPECT_TRUE(refused) << read_all(log);
  EXPECT_NE(read_all(log).find("agent.toml:2:1: error: unknown key 'intervall'"), std::string::npos)
      << read_all(log);
  EXPECT_NE(read_all(log).find("agent.toml:5:13: error:"), std::string::npos) << read_all(log);
  EXPECT_EQ(::waitpid(pid, nullptr, WNOHANG), 0) << "loupe ended on a bad profile\n"
                                                 << read_all(log);
  // A good one: the first session ends with its final report, the next starts with it.
  write_profile("second.jsonl");
  ::kill(pid, SIGHUP);
  if (!wait_for(log, "session running", 2, 120)) {
    finish();
    FAIL() << read_all(log);
  }
  ::kill(pid, SIGTERM);
  int status = 0;
  ASSERT_EQ(::waitpid(pid, &status, 0), pid);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 130) << status << "\n" << read_all(log);
  const int first = final_records(dir_ + "/out/first.jsonl");
  const int second = final_records(dir_ + "/out/second.jsonl");
  std::printf("  final records: %d of the first session, %d of the reloaded one\n", first, second);
  EXPECT_GT(first, 0) << read_all(log);
  EXPECT_GT(second, 0) << read_all(log);
}

// A session that runs a command is not restarted: SIGHUP says why, and the run goes on.
TEST_F(AgentE2E, SighupToASessionWithACommandIsRefusedWithTheReason) {
  const std::string profile = dir_ + "/p.toml", log = dir_ + "/loupe.log";
  std::ofstream(profile) << "[session]\noutput_dir = \"" << dir_ << "/out\"\n"
                         << "[[plugins]]\nname = \"cpusample\"\nfrequency = 49\n"
                         << "[[sinks]]\nname = \"jsonl\"\n";
  pid_t pid = ::fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    const std::string cmd = "exec " + loupe_ + " -v run " + profile + " -- " + CPU_SPIN_WORKLOAD +
                            " 3 user > " + log + " 2>&1";
    ::execl("/bin/sh", "sh", "-c", cmd.c_str(), static_cast<char*>(nullptr));
    ::_exit(127);
  }
  const bool running = wait_for(log, "session running", 1, 120);
  ::kill(pid, SIGHUP);
  int status = 0;
  ASSERT_EQ(::waitpid(pid, &status, 0), pid);
  ASSERT_TRUE(running) << read_all(log);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << status << "\n" << read_all(log);
  EXPECT_NE(read_all(log).find("SIGHUP: a session that runs a command is not reloaded"),
            std::string::npos)
      << read_all(log);
}

}  // namespace
}  // namespace loupe::test
