// SPDX-License-Identifier: Apache-2.0
//
// Runs `loupe run PROFILE -- CMD...` with the jsonl sink and reads the records back: the
// fixture every profiler's end-to-end tests share (root, $LOUPE_BIN, tracefs, a scratch dir).
#ifndef LOUPE_TESTS_CLI_RUN_HPP
#define LOUPE_TESTS_CLI_RUN_HPP

#include <fcntl.h>
#include <gtest/gtest.h>
#include <spawn.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

extern char** environ;

namespace loupe::test {

struct RunResult {
  int exit_code = -1;
  std::string output;  // stdout + stderr of loupe and the command
  std::vector<nlohmann::json> records;

  std::vector<const nlohmann::json*> all(const std::string& kind, const std::string& name) const {
    std::vector<const nlohmann::json*> out;
    for (const auto& r : records)
      if (r.value("kind", "") == kind && r.value("name", "") == name && r.value("is_final", false))
        out.push_back(&r);
    return out;
  }

  // The final health record of a bounded map's loss: plugins name it by the record's name
  // ("stats_full") or by its component ("offcpu/keys_full"); nullptr when there is none.
  const nlohmann::json* loss(const std::string& what) const {
    for (const auto& r : records)
      if (r.value("kind", "") == "health" && r.value("is_final", false) &&
          (r.value("name", "") == what ||
           (r.contains("health") && r["health"].value("component", "") == what)))
        return &r;
    return nullptr;
  }

  // Checks the overflow contract (issue 27): the loss `what` was reported, WARN, with the
  // count `lost` and a message naming `key`, the config key that raises the bound.
  // Returns the reported count (0 when absent) for the caller's own invariant.
  std::uint64_t expect_loss(const std::string& what, const std::string& key) const {
    const nlohmann::json* h = loss(what);
    EXPECT_NE(h, nullptr) << "no final health record " << what;
    if (!h) return 0;
    const auto& hv = (*h)["health"];
    EXPECT_EQ(hv.value("severity", ""), "warn") << h->dump();
    EXPECT_NE(hv.value("message", "").find(key), std::string::npos)
        << "the message must name " << key << ": " << h->dump();
    return hv.value("value", std::uint64_t{0});
  }
};

// The JSON objects a workload printed about itself, one per line, in the order printed
// (loupe's own lines and anything else that is not an object are skipped): the figures a
// test compares loupe's with.
inline std::vector<nlohmann::json> json_lines(const std::string& text) {
  std::vector<nlohmann::json> out;
  std::size_t pos = 0;
  while (pos < text.size()) {
    std::size_t end = text.find('\n', pos);
    if (end == std::string::npos) end = text.size();
    if (text[pos] == '{') {
      nlohmann::json j = nlohmann::json::parse(text.substr(pos, end - pos), nullptr, false);
      if (j.is_object()) out.push_back(std::move(j));
    }
    pos = end + 1;
  }
  return out;
}

// Starts `cmd` with its standard output into `out_file` (what a workload says of itself, read
// after a session given its pid); its pid, or -1.
inline pid_t spawn_to_file(const std::vector<std::string>& cmd, const std::string& out_file) {
  std::vector<char*> argv;
  for (const auto& a : cmd) argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);
  posix_spawn_file_actions_t fa;
  ::posix_spawn_file_actions_init(&fa);
  ::posix_spawn_file_actions_addopen(&fa, STDOUT_FILENO, out_file.c_str(),
                                     O_WRONLY | O_CREAT | O_TRUNC, 0644);
  pid_t pid = -1;
  const int spawned = ::posix_spawn(&pid, argv[0], &fa, nullptr, argv.data(), environ);
  ::posix_spawn_file_actions_destroy(&fa);
  return spawned == 0 ? pid : -1;
}

// The whole of a file (empty when it cannot be read).
inline std::string file_text(const std::string& path) {
  std::ifstream in(path);
  return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
}

// `a`'s share of the time two parts of a workload took by its own clock, over a session's
// window [start_ns, end_ns] (realtime): the workload prints its running totals (keys `a`
// and `b`, in seconds) with `wall_ns` now and then; the share is from its last line at or
// before the window's start (none: it started in the session) to its first at or after
// the end (none: it ended in the session). 0 when it said nothing.
inline double own_share_over(const std::vector<nlohmann::json>& said, const std::string& a,
                             const std::string& b, std::uint64_t start_ns, std::uint64_t end_ns) {
  double a0 = 0, b0 = 0, a1 = 0, b1 = 0;
  for (const auto& line : said) {
    if (!line.contains(a)) continue;
    const auto t = line.value("wall_ns", std::uint64_t{0});
    if (t <= start_ns) {
      a0 = line.value(a, 0.0);
      b0 = line.value(b, 0.0);
    }
    a1 = line.value(a, 0.0);
    b1 = line.value(b, 0.0);
    if (t >= end_ns) break;
  }
  const double da = a1 - a0, db = b1 - b0;
  return da + db > 0 ? da / (da + db) : 0;
}

class CliRun : public ::testing::Test {
 protected:
  void SetUp() override {
    if (geteuid() != 0) GTEST_SKIP() << "needs root: loads BPF programs";
    const char* bin = std::getenv("LOUPE_BIN");
    if (!bin || !std::filesystem::exists(bin))
      GTEST_SKIP() << "LOUPE_BIN not built: " << (bin ? bin : "(unset)");
    struct stat st {};
    if (::stat("/sys/kernel/tracing/events", &st) != 0 &&
        mount("nodev", "/sys/kernel/tracing", "tracefs", 0, nullptr) != 0)
      GTEST_SKIP() << "tracefs absent and cannot be mounted";
    loupe_ = bin;
    char tmpl[] = "/tmp/loupe-e2e-XXXXXX";
    ASSERT_NE(mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
  }
  void TearDown() override {
    if (!dir_.empty()) std::filesystem::remove_all(dir_);
  }

  // PROFILE = [session] output_dir (+ `session_keys`), then `body` (plugins and any extra
  // sinks), then the jsonl sink the records are read from.
  // `debug_log`: loupe runs with -vv and its log goes to that file as it runs (a command can
  // wait on what the session did), and into the output after.
  RunResult run(const std::string& body, const std::vector<std::string>& cmd,
                const std::string& extra_args = "", const std::string& session_keys = "",
                const std::string& debug_log = "") {
    std::string profile = dir_ + "/profile.toml";
    std::filesystem::remove_all(dir_ + "/out");  // a second run in one test starts clean
    std::ofstream(profile) << "[session]\noutput_dir = \"" << dir_ << "/out\"\n"
                           << session_keys << "\n"
                           << body << "\n[[sinks]]\nname = \"jsonl\"\n";
    // No command: `extra_args` names the target (--pid P) or the session is system-wide.
    std::string line = loupe_ + (debug_log.empty() ? "" : " -vv") + " run " + profile + " " +
                       extra_args + (cmd.empty() ? "" : " --");
    for (const auto& c : cmd) line += " " + c;
    line += debug_log.empty() ? " 2>&1"
                              : " 2>" + debug_log + "; rc=$?; cat " + debug_log + "; exit $rc";
    RunResult r;
    FILE* p = popen(line.c_str(), "r");
    char buf[4096];
    size_t n;
    while ((n = fread(buf, 1, sizeof(buf), p)) > 0) r.output.append(buf, n);
    int status = pclose(p);
    r.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
    std::ifstream in(dir_ + "/out/records.jsonl");
    std::string rec;
    while (std::getline(in, rec))
      if (!rec.empty()) r.records.push_back(nlohmann::json::parse(rec));
    return r;
  }

  // The running kernel's answer to whether `feature` can be attached (the preflight,
  // `loupe check --json`), so a test asserts what is true on the kernel it runs on.
  bool kernel_has(const std::string& feature) const {
    std::string out;
    FILE* p = ::popen((loupe_ + " check --json 2>/dev/null").c_str(), "r");
    char buf[4096];
    std::size_t n;
    while (p && (n = std::fread(buf, 1, sizeof(buf), p)) > 0) out.append(buf, n);
    if (p) ::pclose(p);
    const nlohmann::json check = nlohmann::json::parse(out, nullptr, false);
    if (check.is_discarded() || !check.contains("features")) return false;
    for (const auto& f : check["features"])
      if (f.value("name", "") == feature) return f.value("available", false);
    return false;
  }

  std::string loupe_;
  std::string dir_;
};

}  // namespace loupe::test

#endif  // LOUPE_TESTS_CLI_RUN_HPP
