// SPDX-License-Identifier: Apache-2.0
//
// Process-tree runs shared by the profilers' end-to-end tests: the tree workload
// (tests/support/tree_workload.c, built as TREE_WORKLOAD) and `loupe run --pid` against a
// parent that already has workers and forks more once the session is running.
#ifndef LOUPE_TESTS_TREE_RUN_HPP
#define LOUPE_TESTS_TREE_RUN_HPP

#include <gtest/gtest.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <functional>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>
#include <vector>

#include "cli_run.hpp"

namespace loupe::test {

inline const std::string kTreeWorkload = TREE_WORKLOAD;
constexpr int kTreeParentN = 3;  // what the workload's parent does of the work itself

// The sum of `field` of every final record named `name` of `kind` whose labels match `where`.
inline double sum_final(const RunResult& r, const std::string& kind, const std::string& name,
                        const std::vector<std::pair<std::string, std::string>>& where,
                        const std::function<double(const nlohmann::json&)>& value) {
  double total = 0;
  for (const auto* rec : r.all(kind, name)) {
    bool ok = true;
    for (const auto& [k, v] : where) ok &= (*rec)["labels"].value(k, "") == v;
    if (ok) total += value(*rec);
  }
  return total;
}

class TreeRun : public CliRun {
 protected:
  // `loupe -v run PROFILE --pid P [extra]` where P = the tree workload started with
  // `--go FILE --late late workers mode n`: P forks `workers` at once (they wait for FILE),
  // the session attaches to P, and once it runs FILE is created: P forks `late` more and
  // everyone works. Returns the run; `parent` gets P.
  RunResult run_pid(const std::string& body, int workers, int late, const std::string& mode, int n,
                    const std::string& extra_args = "", pid_t* parent = nullptr) {
    const std::string go = dir_ + "/go";
    std::filesystem::remove(go);
    std::filesystem::remove(go + ".ready");
    pid_t p = fork();
    if (p == 0) {
      std::string w = std::to_string(workers), l = std::to_string(late), nn = std::to_string(n);
      execl(kTreeWorkload.c_str(), kTreeWorkload.c_str(), "--go", go.c_str(), "--late", l.c_str(),
            w.c_str(), mode.c_str(), nn.c_str(), (char*)nullptr);
      _exit(127);
    }
    if (parent) *parent = p;
    // Reaped at once: a zombie still answers kill(P, 0), and the session ends when P is gone.
    int wst = -1;
    std::thread reaper([&] { ::waitpid(p, &wst, 0); });
    RunResult r;
    struct stat st {};
    auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
    while (::stat((go + ".ready").c_str(), &st) != 0) {
      if (std::chrono::steady_clock::now() > deadline) {
        ::kill(p, SIGKILL);
        reaper.join();
        ADD_FAILURE() << "the workload never got ready";
        return r;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    std::string profile = dir_ + "/profile.toml";
    std::filesystem::remove_all(dir_ + "/out");
    std::ofstream(profile) << "[session]\noutput_dir = \"" << dir_ << "/out\"\n"
                           << body << "\n[[sinks]]\nname = \"jsonl\"\n";
    std::string line =
        loupe_ + " -v run " + profile + " --pid " + std::to_string(p) + " " + extra_args + " 2>&1";
    FILE* out = popen(line.c_str(), "r");
    char buf[4096];
    bool released = false;
    while (fgets(buf, sizeof(buf), out)) {
      r.output += buf;
      if (!released && std::string(buf).find("session running") != std::string::npos) {
        std::ofstream(go) << "go\n";
        released = true;
      }
    }
    int status = pclose(out);
    r.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
    if (!released) {
      std::ofstream(go) << "go\n";  // let the workload finish
    }
    reaper.join();
    EXPECT_TRUE(WIFEXITED(wst) && WEXITSTATUS(wst) == 0) << "workload status " << wst;
    std::ifstream in(dir_ + "/out/records.jsonl");
    std::string rec;
    while (std::getline(in, rec))
      if (!rec.empty()) r.records.push_back(nlohmann::json::parse(rec));
    return r;
  }
};

}  // namespace loupe::test

#endif  // LOUPE_TESTS_TREE_RUN_HPP
