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
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
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

class AgentE2E : public CliRun {
 protected:
  // loupe started as a service manager starts it: its own process, output to `log`, for
  // the test to signal and wait for (`args` after `loupe -v run`).
  pid_t spawn(const std::string& args, const std::string& log) {
    pid_t pid = ::fork();
    if (pid == 0) {
      const std::string cmd = "exec " + loupe_ + " -v run " + args + " > " + log + " 2>&1";
      ::execl("/bin/sh", "sh", "-c", cmd.c_str(), static_cast<char*>(nullptr));
      ::_exit(127);
    }
    return pid;
  }
  // Its exit status (-1: killed or not exited normally).
  static int wait_exit(pid_t pid) {
    int status = 0;
    if (::waitpid(pid, &status, 0) != pid || !WIFEXITED(status)) return -1;
    return WEXITSTATUS(status);
  }
};

TEST_F(AgentE2E, WindowsAreContiguousAndAddUpToTheSession) {
  RunResult r = run(kCpusample, {CPU_SPIN_WORKLOAD, "3.5", "user"}, "", "rotate = 1\n");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const fs::path out = dir_ + "/out";
  auto ws = windows_of(out);
  // 3.5 s of the command: a window ends each second and at its exit, but a window's end
  // can take longer than a second on a loaded machine (its collect names new stacks), and
  // the next then starts at the next whole second: at least two, whatever the load.
  ASSERT_GE(ws.size(), 2u) << r.output;
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

// An agent over process churn: what exited processes left in the profilers' maps is
// evicted once their windows hold it, so the maps follow the live processes. 60 short
// processes (each spins; the shell waiting for it is woken by each) under cpusample and
// offcpu. A run without rotation counts the keys the workload makes (how
// many depends on the machine's speed: an emulated guest's processes live longer and make
// five times more); the rotating run then gets room for half of them, which only eviction
// can live within. The windows hold every sample and every block the kernel counted, but
// for what was refused and counted.
TEST_F(AgentE2E, ExitedProcessesAreEvictedAndEverySampleIsInAWindow) {
  auto body = [](std::size_t cs_keys, std::size_t oc_keys) {
    return "[[plugins]]\nname = \"cpusample\"\nfrequency = 199\nuser_stacks = true\n"
           "max_keys = " +
           std::to_string(cs_keys) +
           "\n[[plugins]]\nname = \"offcpu\"\nmax_keys = " + std::to_string(oc_keys) +
           "\n[[sinks]]\nname = \"folded\"\n";
  };
  // 60 processes a run: under emulation beside two busy loops each exec takes long enough
  // that 240 processes over two runs took more than the kernel tier's 300 s.
  const std::string loop = std::string("i=0; while [ $i -lt 60 ]; do ") + CPU_SPIN_WORKLOAD +
                           " 0.06 user; i=$((i+1)); done";
  auto value = [](const RunResult& r, const std::string& component) {
    const json* h = r.loss(component);
    EXPECT_NE(h, nullptr) << "no final health row " << component << "\n" << r.output;
    return h ? (*h)["health"].value("value", std::uint64_t{0}) : 0;
  };

  RunResult all = run(body(65536, 65536), {"sh", "-c", "'" + loop + "'"}, "", "interval = 0.25\n");
  ASSERT_EQ(all.exit_code, 0) << all.output;
  ASSERT_EQ(value(all, "cpusample/counts_full"), 0u);
  ASSERT_EQ(value(all, "offcpu/keys_full"), 0u);
  EXPECT_EQ(all.loss("offcpu/evicted_processes"), nullptr) << "no eviction without rotate";
  // One record per key (offcpu's keys differ by waker too: at least as many as either view).
  const std::size_t cs_keys = all.all("stack", "cpu").size();
  const std::size_t oc_keys =
      std::max(all.all("stack", "offcpu").size(), all.all("stack", "offcpu_wakers").size());
  ASSERT_GE(cs_keys, 32u) << all.output;
  ASSERT_GE(oc_keys, 32u) << all.output;

  RunResult r = run(body(cs_keys / 2, oc_keys / 2), {"sh", "-c", "'" + loop + "'"}, "",
                    "rotate = 1\ninterval = 0.25\n");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const std::uint64_t cs_full = value(r, "cpusample/counts_full");
  const std::uint64_t oc_full = value(r, "offcpu/keys_full");
  const std::uint64_t cs_evicted = value(r, "cpusample/evicted_processes");
  // The kernel hands a process's cpusample keys over at its exit (loupe/handover.bpf.h);
  // user space evicts what is left (keys made after the handover, or past its bound).
  const std::uint64_t oc_evicted = value(r, "offcpu/evicted_processes");
  const std::uint64_t oc_stacks = value(r, "offcpu/evicted_stacks");
  const std::uint64_t in_use =
      value(r, "cpusample/evicted_in_use") + value(r, "offcpu/evicted_in_use");

  const fs::path out = dir_ + "/out";
  std::int64_t cpu_in_windows = 0, blocks_in_windows = 0;
  for (const auto& w : windows_of(out)) {
    cpu_in_windows += folded_total(w.dir / "cpu.folded");
    std::ifstream in(w.dir / "records.jsonl");
    for (std::string line; std::getline(in, line);) {
      json rec = json::parse(line);
      if (rec.value("kind", "") == "metric" && rec.value("name", "") == "offcpu_blocks")
        blocks_in_windows += static_cast<std::int64_t>(rec["metric"]["value"].get<double>());
    }
  }
  auto metric = [&](const std::string& name) {
    for (const json* m : r.all("metric", name))
      return static_cast<std::int64_t>((*m)["metric"]["value"].get<double>());
    ADD_FAILURE() << "no final metric " << name;
    return std::int64_t{-1};
  };
  const std::int64_t samples = metric("samples");
  const std::int64_t cs_handed = metric("keys_handed_over");
  const std::int64_t blocks = metric("blocks_ended");
  std::printf(
      "  without rotate, keys made: cpusample %zu, offcpu %zu; the rotating run has room for half\n"
      "  with rotate: evicted cpusample %llu processes (and %lld keys handed over at exit), "
      "offcpu %llu (%llu stacks freed); "
      "refused keys: cpusample %llu, offcpu %llu; ids taken as freed: %llu\n"
      "  samples: kernel %lld, windows %lld; blocks: kernel %lld, windows %lld\n",
      cs_keys, oc_keys, (unsigned long long)cs_evicted, (long long)cs_handed,
      (unsigned long long)oc_evicted, (unsigned long long)oc_stacks, (unsigned long long)cs_full,
      (unsigned long long)oc_full, (unsigned long long)in_use, (long long)samples,
      (long long)cpu_in_windows, (long long)blocks, (long long)blocks_in_windows);
  // Processes exit all through the run; all but the last interval's are evicted, or their
  // keys handed over as they exit (a key each at least).
  EXPECT_GE(cs_evicted + static_cast<std::uint64_t>(std::max<std::int64_t>(cs_handed, 0)), 30u);
  EXPECT_GE(oc_evicted, 40u);
  // Without eviction a map with room for half the keys refuses at least the other half, a
  // sample or a block each. With it, what is refused is what the live processes of the
  // reports' intervals need beyond the room: nothing on the host; under emulation beside
  // two busy loops, where a report can take seconds and many processes start meanwhile,
  // 58 blocks of 736 keys' worth (round 7, 6.12) and 410 (round 10, 6.1). How much depends
  // on how long the reports take; that eviction frees the room does not: held below the
  // least a map without eviction would lose, and counted either way.
  EXPECT_LT(cs_full, cs_keys / 2) << "cpusample's map still filled with exited processes";
  EXPECT_LT(oc_full, oc_keys / 2) << "offcpu's map still filled with exited processes";
  EXPECT_GT(samples, 0);
  // Exact, whatever was refused: each sample and block is in a window or counted lost.
  EXPECT_EQ(cpu_in_windows + static_cast<std::int64_t>(cs_full), samples)
      << "every sample the kernel counted is in a window";
  EXPECT_EQ(blocks_in_windows + static_cast<std::int64_t>(oc_full), blocks)
      << "every block that ended is in a window";
}

// [session] max_cpu_percent: loupe measures its own cost at every report (its programs'
// run time from the kernel's statistics, its threads' CPU time) and says a report over the
// budget, naming the costliest plugin; within it, the row is OK with the cost.
TEST_F(AgentE2E, ItsOwnCostIsMeasuredAndABudgetPassedIsSaid) {
  for (const char* budget : {"0.001", "100"}) {
    SCOPED_TRACE(budget);
    RunResult r = run(kCpusample, {CPU_SPIN_WORKLOAD, "2.5", "user"}, "",
                      std::string("interval = 0.5\nmax_cpu_percent = ") + budget + "\n");
    ASSERT_EQ(r.exit_code, 0) << r.output;
    std::map<std::string, double> part;
    double cpusample = -1;
    for (const json* m : r.all("metric", "cost_cpu_percent")) {
      const auto& labels = (*m)["labels"];
      const double v = (*m)["metric"]["value"].get<double>();
      if (labels.contains("instance")) {
        if (labels["instance"] == "cpusample") cpusample = v;
      } else {
        part[labels["part"].get<std::string>()] = v;
      }
    }
    ASSERT_EQ(part.size(), 3u) << r.output;
    std::printf("  budget %s: loupe's cost over the session %.3f%% (bpf %.3f%%, threads %.3f%%)\n",
                budget, part["total"], part["bpf"], part["threads"]);
    EXPECT_GT(part["threads"], 0);
    EXPECT_GT(part["bpf"], 0) << "cpusample's program ran";
    EXPECT_NEAR(part["total"], part["bpf"] + part["threads"], 1e-9);
    EXPECT_NEAR(cpusample, part["bpf"], 1e-9) << "the one plugin's programs are the BPF part";
    EXPECT_LT(part["total"], 100);
    const json* b = final_health(r, "budget");
    ASSERT_NE(b, nullptr) << r.output;
    const auto& h = (*b)["health"];
    const std::string msg = h.value("message", "");
    if (std::string(budget) == "100") {
      EXPECT_EQ(h["severity"], "ok") << b->dump();
      EXPECT_NE(msg.find("within max_cpu_percent = 100"), std::string::npos) << msg;
    } else {
      EXPECT_EQ(h["severity"], "warn") << b->dump();
      EXPECT_GE(h["value"].get<int>(), 1) << b->dump();
      EXPECT_NE(msg.find("cpusample"), std::string::npos)
          << "the costliest plugin is named: " << msg;
      // Thinned when its programs were the cost, else said not to be: never silent.
      EXPECT_TRUE(msg.find("nothing was thinned") != std::string::npos ||
                  msg.find("thinned to stay within it: cpusample") != std::string::npos)
          << msg;
    }
  }
}

// Within a budget its programs alone pass, the costliest profiler is thinned (plugin ABI
// 1.9): the session says every change and the divisors in force, the plugin says what it
// skipped, its program costs less per event, and its counts stay estimates of the whole.
// offcpu under a ping-pong (two threads on one CPU: a switch each way), its stacks by the
// in-kernel unwinder as the agent profile takes them. The whole is the plugin's count of the
// target's switch-outs, taken before the thinning decision; the estimate is every block counted
// (each kept one weighing its divisor), whose error for a divisor D over S switches is about sqrt(S
// * (D - 1)).
TEST_F(AgentE2E, ABudgetPassedThinsTheCostliestProfilerAndItsCountsStayEstimates) {
  const std::string body = "[[plugins]]\nname = \"offcpu\"\nwakers = false\nrun_queue = false\n";
  struct Cost {
    double bpf = -1, threads = -1, switch_ns = -1;
  };
  auto cost_of = [](const RunResult& r) {
    Cost c;
    for (const json* m : r.all("metric", "cost_cpu_percent")) {
      const auto& labels = (*m)["labels"];
      if (labels.contains("instance")) continue;
      if (labels["part"] == "bpf") c.bpf = (*m)["metric"]["value"].get<double>();
      if (labels["part"] == "threads") c.threads = (*m)["metric"]["value"].get<double>();
    }
    for (const json* m : r.all("metric", "probe_avg_ns"))
      if ((*m)["labels"].value("program", "").find("switch") != std::string::npos)
        c.switch_ns = (*m)["metric"]["value"].get<double>();
    return c;
  };
  auto metric = [](const RunResult& r, const std::string& name) {
    for (const json* m : r.all("metric", name))
      return static_cast<std::int64_t>((*m)["metric"]["value"].get<double>());
    ADD_FAILURE() << "no final metric " << name;
    return std::int64_t{0};
  };
  // What the profiler's programs cost here, unthinned (a budget of 100% is never passed).
  RunResult free_run =
      run(body, {OFFCPU_WORKLOAD, "pingpong", "3"}, "", "interval = 1\nmax_cpu_percent = 100\n");
  ASSERT_EQ(free_run.exit_code, 0) << free_run.output;
  const Cost unthinned = cost_of(free_run);
  ASSERT_GT(unthinned.bpf, 0) << free_run.output;
  EXPECT_EQ(free_run.loss("offcpu/thinned"), nullptr) << "nothing thinned within the budget";

  // A budget its programs alone pass three times over. loupe's threads are not in it: in
  // an emulated guest beside two busy loops they cost as much as the programs and move by
  // half from one second to the next, and the controller thins a profiler only while its
  // programs are a fair part of the excess, which they stay here.
  const double budget = 0.3 * unthinned.bpf;
  RunResult r = run(body, {OFFCPU_WORKLOAD, "pingpong", "5"}, "",
                    "interval = 1\nmax_cpu_percent = " + std::to_string(budget) + "\n");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const Cost thinned_cost = cost_of(r);

  std::uint64_t highest = 1, last = 1;
  int changes = 0;
  for (const auto& rec : r.records) {
    if (rec.value("kind", "") != "event" || rec.value("name", "") != "budget_thinning") continue;
    const auto& f = rec["event"]["fields"];
    EXPECT_EQ(f["instance"], "offcpu") << rec.dump();
    last = f["new_divisor"].get<std::uint64_t>();
    highest = std::max(highest, last);
    ++changes;
  }
  ASSERT_GE(changes, 1) << "the budget was passed and nothing was thinned\n" << r.output;
  EXPECT_GE(highest, 2u);
  const json* gauge = nullptr;
  for (const json* m : r.all("metric", "thinning_divisor"))
    if ((*m)["labels"]["instance"] == "offcpu") gauge = m;
  ASSERT_NE(gauge, nullptr) << r.output;
  EXPECT_EQ((*gauge)["metric"]["value"].get<double>(), static_cast<double>(last));

  const json* b = final_health(r, "budget");
  ASSERT_NE(b, nullptr) << r.output;
  const std::string msg = (*b)["health"].value("message", "");
  EXPECT_NE(msg.find("thinned to stay within it: offcpu kept 1 in " + std::to_string(highest)),
            std::string::npos)
      << msg;
  const json* skipped = r.loss("offcpu/thinned");
  ASSERT_NE(skipped, nullptr) << r.output;
  EXPECT_EQ((*skipped)["health"]["severity"], "warn") << skipped->dump();
  const auto thinned = (*skipped)["health"]["value"].get<std::int64_t>();

  const std::int64_t whole = metric(r, "switches_out");
  const std::int64_t estimate = metric(r, "blocks_ended") + metric(r, "blocks_below_min");
  const double sigma = std::sqrt(static_cast<double>(whole) * static_cast<double>(highest - 1));
  std::printf(
      "  unthinned: bpf %.3f%%, threads %.3f%%, %.0f ns a switch; budget %.3f%%\n"
      "  thinned: bpf %.3f%%, threads %.3f%%, %.0f ns a switch; %d changes, divisor %llu at "
      "most, %llu at the end\n"
      "  the target's switch-outs: %lld counted, %lld not sampled, %lld blocks estimated "
      "(sigma %.0f)\n",
      unthinned.bpf, unthinned.threads, unthinned.switch_ns, budget, thinned_cost.bpf,
      thinned_cost.threads, thinned_cost.switch_ns, changes, (unsigned long long)highest,
      (unsigned long long)last, (long long)whole, (long long)thinned, (long long)estimate, sigma);
  ASSERT_GT(whole, 0);
  EXPECT_GT(thinned, 0);
  EXPECT_LT(thinned, whole);
  EXPECT_LE(std::abs(static_cast<double>(estimate - whole)), 4 * sigma + 0.02 * whole)
      << "each kept block counts as the divisor: the estimate is of every block";
  // Unscaled, the kept blocks alone would be the whole less what was skipped.
  EXPECT_GT(estimate, whole - thinned);
  // A switch-out thinned out takes no stacks, its program's cost: counted in walks, not
  // timed (the ns a switch above move by half between two runs in an emulated guest beside
  // another, and thinned ran slower than unthinned once at 1 in 32).
  const std::int64_t walks = metric(r, "unwind_walks");
  EXPECT_GT(walks, 0) << r.output;
  EXPECT_LE(static_cast<double>(walks), static_cast<double>(whole - thinned) + 0.01 * whole)
      << "a switch-out thinned out takes no stacks";
}

// As a service manager stops the agent: SIGTERM ends the current window, written like the
// others; retain keeps the newest two. The signal comes once four windows were written,
// however long the attach took.
TEST_F(AgentE2E, SigtermEndsTheLastWindowAndRetainKeepsTheNewest) {
  const std::string profile = dir_ + "/p.toml", log = dir_ + "/loupe.log";
  std::ofstream(profile) << "[session]\noutput_dir = \"" << dir_ << "/out\"\nrotate = 1\n"
                         << "retain = 2\n"
                         << kCpusample << "[[sinks]]\nname = \"jsonl\"\n";
  const pid_t pid = spawn(profile + " -- " + CPU_SPIN_WORKLOAD + " 600 user", log);
  ASSERT_GT(pid, 0);
  const bool four = wait_for(log, "window " + dir_ + "/out/windows/", 4, 240);
  ::kill(pid, SIGTERM);
  const int rc = wait_exit(pid);
  ASSERT_TRUE(four) << read_all(log);
  EXPECT_EQ(rc, 130) << read_all(log);  // interrupted, report written
  RunResult r;
  std::ifstream in(dir_ + "/out/records.jsonl");
  for (std::string rec; std::getline(in, rec);)
    if (!rec.empty()) r.records.push_back(json::parse(rec));
  auto ws = windows_of(dir_ + "/out");
  ASSERT_EQ(ws.size(), 2u) << read_all(log);
  const json* written = final_health(r, "windows");
  ASSERT_NE(written, nullptr) << read_all(log);
  const auto n = (*written)["health"]["value"].get<std::size_t>();
  EXPECT_GE(n, 5u) << written->dump();
  EXPECT_NE((*written)["health"]["message"].get<std::string>().find(std::to_string(n - 2) +
                                                                    " removed by retain"),
            std::string::npos)
      << written->dump();
  // The last window ends where the final report does: at the stop.
  std::uint64_t final_end = 0;
  for (const auto& rec : r.records)
    if (rec.value("kind", "") == "stack" && rec.value("is_final", false))
      final_end = rec["window"]["end_ns"].get<std::uint64_t>();
  const auto last_start = ws.back().meta["start_ns"].get<std::uint64_t>();
  const auto last_end = ws.back().meta["end_ns"].get<std::uint64_t>();
  EXPECT_EQ(last_end, final_end);
  EXPECT_EQ(last_start, ws.front().meta["end_ns"].get<std::uint64_t>());
  // A window the signal cut short may hold no sample yet; one of half a second holds some.
  if (last_end - last_start >= 500000000ULL) {
    EXPECT_GT(folded_total(ws.back().dir / "cpu.folded"), 0)
        << "the window SIGTERM ended has the samples since the previous one";
  }
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
  const pid_t pid = spawn(profile + " --reloadable", log);
  ASSERT_GT(pid, 0);
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
  EXPECT_EQ(wait_exit(pid), 130) << read_all(log);
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
  const pid_t pid = spawn(profile + " -- " + CPU_SPIN_WORKLOAD + " 3 user", log);
  ASSERT_GT(pid, 0);
  const bool running = wait_for(log, "session running", 1, 120);
  ::kill(pid, SIGHUP);
  const int rc = wait_exit(pid);
  ASSERT_TRUE(running) << read_all(log);
  EXPECT_EQ(rc, 0) << read_all(log);
  EXPECT_NE(read_all(log).find("SIGHUP: a session that runs a command is not reloaded"),
            std::string::npos)
      << read_all(log);
}

}  // namespace
}  // namespace loupe::test
