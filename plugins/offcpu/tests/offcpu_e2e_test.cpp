// SPDX-License-Identifier: Apache-2.0
//
// offcpu end to end through the CLI on the real kernel, against what the workload
// measured itself: time off the CPU per blocking function (within 5 %), the reason
// (sleep, uninterruptible, preempted), the waker of a pipe reader, run-queue latency of
// oversubscribed threads and not of a lone one, the task that held the CPU meanwhile,
// and time still off the CPU when the session ends. Every hook flavour the kernel offers.
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <regex>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "cli_run.hpp"
#include "handover_room.hpp"

using nlohmann::json;

namespace {

using loupe::test::RunResult;

bool has_frame(const json& rec, const std::string& symbol, std::size_t from = 0,
               std::size_t to = SIZE_MAX) {
  const auto& frames = rec["stack"]["frames"];
  for (std::size_t i = from; i < frames.size() && i < to; ++i)
    if (frames[i]["symbol"].is_string() && frames[i]["symbol"].get<std::string>() == symbol)
      return true;
  return false;
}

std::size_t separator(const json& rec) {
  const auto& frames = rec["stack"]["frames"];
  for (std::size_t i = 0; i < frames.size(); ++i)
    if (frames[i]["symbol"].is_string() && frames[i]["symbol"].get<std::string>() == "--") return i;
  return SIZE_MAX;
}

std::int64_t value(const json& rec, const std::string& name) {
  for (const auto& v : rec["stack"]["values"])
    if (v["name"] == name) return v["value"].get<std::int64_t>();
  return 0;
}

// A final health counter of offcpu's (0 when absent).
double health_value(const RunResult& r, const std::string& component) {
  for (const auto& rec : r.records)
    if (rec.value("kind", "") == "health" && rec.value("is_final", false) &&
        rec["health"].value("component", "") == component)
      return rec["health"]["value"].get<double>();
  return 0;
}

double workload_figure(const std::string& output, const std::string& name) {
  std::smatch m;
  if (!std::regex_search(output, m, std::regex(name + "=([0-9]+)"))) return -1;
  return std::stod(m[1]);
}

class OffcpuMechanisms : public loupe::test::CliRun,
                         public ::testing::WithParamInterface<const char*> {
 protected:
  RunResult run_offcpu(const std::string& keys, const std::vector<std::string>& cmd,
                       const std::string& extra = "") {
    RunResult r = run(
        std::string("[[plugins]]\nname = \"offcpu\"\nmechanism = \"") + GetParam() + "\"\n" + keys,
        cmd, extra);
    if (r.exit_code != 0 && r.output.find("no usable hook") != std::string::npos)
      unavailable_ = true;
    return r;
  }
  bool unavailable_ = false;
};

// Time off the CPU under each blocking function of `offcpu_workload blockers`, held to
// the workload's own figures; the time per function and reason, for the caller's checks.
std::map<std::string, std::map<std::string, double>> expect_time_per_blocking_function(
    const RunResult& r, const char* mechanism) {
  // A thread's wall time in a function is its CPU time there plus its time off the CPU
  // there, whatever the reason: the workload's own wall minus CPU time is what loupe must
  // find under each function. (Wall time alone is not: on a loaded machine the CPU time
  // and the waits for a CPU between the blocks grow.)
  const std::string pid = std::to_string(static_cast<long>(workload_figure(r.output, "pid")));
  const char* fns[] = {"sleep_in_sleeper", "read_in_reader", "wait_in_vfork"};
  const char* figures[] = {"sleep", "read", "vfork"};
  std::map<std::string, double> want;
  for (int i = 0; i < 3; ++i) {
    const double wall = workload_figure(r.output, std::string(figures[i]) + "_ns");
    const double cpu = workload_figure(r.output, std::string(figures[i]) + "_cpu_ns");
    EXPECT_GT(wall, 0) << r.output;
    EXPECT_GE(cpu, 0) << r.output;
    want[fns[i]] = wall - cpu;
  }

  // Per blocking function: all of its time, and the time per reason. Only the workload's
  // own process: a vfork child runs on its parent's stack, so its sleep carries the same
  // frames under another pid. A user stack the kernel's stack map refused (a hash
  // collision: -EEXIST) leaves its time on a row without user frames, and is counted in
  // the health record offcpu/user_stack_fail: then, and only then, that row's time may
  // make up a function's shortfall.
  std::map<std::string, std::map<std::string, double>> by_fn;
  std::map<std::string, double> no_user_stack;  // by reason
  double stack_fail = 0;
  for (const auto& rec : r.records)
    if (rec.value("kind", "") == "health" && rec.value("is_final", false) &&
        rec["health"].value("component", "") == "offcpu/user_stack_fail")
      stack_fail = rec["health"]["value"].get<double>();
  for (const json* rec : r.all("stack", "offcpu")) {
    if ((*rec)["labels"]["pid"] != pid) continue;
    const std::string reason = (*rec)["labels"]["reason"];
    bool user = false;
    for (const auto& f : (*rec)["stack"]["frames"]) user |= f.value("kind", "") == "user";
    if (!user) no_user_stack[reason] += static_cast<double>(value(*rec, "offcpu_ns"));
    for (const char* fn : fns)
      if (has_frame(*rec, fn)) {
        by_fn[fn][reason] += static_cast<double>(value(*rec, "offcpu_ns"));
        by_fn[fn]["all"] += static_cast<double>(value(*rec, "offcpu_ns"));
      }
  }
  std::printf("  [%s] workload, off the CPU: sleep %.1f ms, read %.1f ms, vfork %.1f ms\n",
              mechanism, want["sleep_in_sleeper"] / 1e6, want["read_in_reader"] / 1e6,
              want["wait_in_vfork"] / 1e6);
  std::printf("  loupe: sleep %.1f ms (S %.1f), read %.1f ms (S %.1f), vfork %.1f ms (D %.1f)\n",
              by_fn["sleep_in_sleeper"]["all"] / 1e6, by_fn["sleep_in_sleeper"]["sleep"] / 1e6,
              by_fn["read_in_reader"]["all"] / 1e6, by_fn["read_in_reader"]["sleep"] / 1e6,
              by_fn["wait_in_vfork"]["all"] / 1e6, by_fn["wait_in_vfork"]["uninterruptible"] / 1e6);
  double stackless = 0;
  for (const auto& [reason, ns] : no_user_stack) stackless += ns;
  if (stack_fail > 0) std::printf("  user stacks refused by the stack map: %.0f\n", stack_fail);
  // A switch-out the program never saw (README "Switches the program did not see") leaves
  // its block's time without stacks, counted.
  const double missed_out_ns = health_value(r, "offcpu/missed_out_ns");
  if (missed_out_ns > 0) std::printf("  missed switch-outs: %.3f ms\n", missed_out_ns / 1e6);
  for (const char* fn : fns) {
    const double named = by_fn[fn]["all"];
    const double allowed = (stack_fail > 0 ? stackless : 0) + missed_out_ns;
    const bool near = std::abs(named - want[fn]) <= 0.05 * want[fn] ||
                      (named < want[fn] && want[fn] - named <= 0.05 * want[fn] + allowed);
    EXPECT_TRUE(near) << fn << ": loupe " << named << " ns, the workload " << want[fn]
                      << " ns; stackless " << stackless << " ns";
  }
  // The reasons: each function blocks on one thing (a sleep, a pipe read; vfork's parent
  // waits uninterruptibly while its child, under its own pid, sleeps), and besides that
  // may only have been preempted, which a loaded machine does between the blocks.
  const std::pair<const char*, const char*> blocks_on[] = {{"sleep_in_sleeper", "sleep"},
                                                           {"read_in_reader", "sleep"},
                                                           {"wait_in_vfork", "uninterruptible"}};
  for (const auto& [fn, reason] : blocks_on) {
    auto& r_ = by_fn[fn];
    EXPECT_GE(r_[reason] + r_["preempted"], 0.98 * r_["all"]) << fn;
    EXPECT_GE(r_[reason], 0.75 * r_["all"]) << fn << " blocks on " << reason;
  }

  return by_fn;
}

TEST_P(OffcpuMechanisms, TimePerBlockingFunctionMatchesTheWorkloadsOwnWithItsReason) {
  RunResult r = run_offcpu("", {OFFCPU_WORKLOAD, "blockers"});
  if (unavailable_) GTEST_SKIP() << GetParam() << " is not available here: " << r.output;
  ASSERT_EQ(r.exit_code, 0) << r.output;
  auto by_fn = expect_time_per_blocking_function(r, GetParam());

  // The pipe reader was woken by the writer: waker stacks (after "--") name it. A waker
  // stack the stack map refused (counted in offcpu/waker_stack_fail) leaves a row whose
  // waker side has no user frames: only then may such rows make up the shortfall.
  double waker_fail = 0;
  for (const auto& rec : r.records)
    if (rec.value("kind", "") == "health" && rec.value("is_final", false) &&
        rec["health"].value("component", "") == "offcpu/waker_stack_fail")
      waker_fail = rec["health"]["value"].get<double>();
  double woken_by_writer = 0, waker_unknown = 0;
  for (const json* rec : r.all("stack", "offcpu_wakers")) {
    const std::size_t sep = separator(*rec);
    ASSERT_NE(sep, SIZE_MAX) << rec->dump();
    if (!has_frame(*rec, "read_in_reader", sep)) continue;
    bool waker_user = false;
    const auto& frames = (*rec)["stack"]["frames"];
    for (std::size_t i = 0; i < sep; ++i) waker_user |= frames[i].value("kind", "") == "user";
    if (has_frame(*rec, "write_from_writer", 0, sep))
      woken_by_writer += static_cast<double>(value(*rec, "offcpu_ns"));
    else if (!waker_user)
      waker_unknown += static_cast<double>(value(*rec, "offcpu_ns"));
  }
  std::printf("  read time woken by write_from_writer: %.1f ms (waker stacks refused: %.0f)\n",
              woken_by_writer / 1e6, waker_fail);
  EXPECT_GE(woken_by_writer + (waker_fail > 0 ? waker_unknown : 0),
            0.9 * by_fn["read_in_reader"]["all"]);
}

TEST_P(OffcpuMechanisms, OffCpuStacksAloneRunOnlyTheSwitchProgramAndLoseNoTime) {
  // run_queue = false and wakers = false: what offcputime does, at its cost. Nothing needs
  // a wake-up then, so sched_waking is not hooked; every block's time is still there.
  RunResult r =
      run_offcpu("run_queue = false\nwakers = false\n", {OFFCPU_WORKLOAD, "blockers"}, "--stats");
  if (unavailable_) GTEST_SKIP() << GetParam() << " is not available here: " << r.output;
  ASSERT_EQ(r.exit_code, 0) << r.output;
  expect_time_per_blocking_function(r, GetParam());
  std::set<std::string> probes;
  for (const json* rec : r.all("metric", "probe_runs"))
    if ((*rec)["labels"].value("instance", "") == "offcpu")
      probes.insert((*rec)["labels"].value("probe", ""));
  EXPECT_EQ(probes, std::set<std::string>{"sched_switch"});
  for (const char* none : {"runq_latency", "runq_blockers", "offcpu_wakers", "runq_waits"})
    EXPECT_TRUE(r.all("histogram", none).empty() && r.all("stack", none).empty() &&
                r.all("metric", none).empty())
        << none << " was reported with run_queue = false";
}

TEST_P(OffcpuMechanisms, RunQueueLatencyOfOversubscribedThreadsAndTheirBlockers) {
  // 3 threads spinning on CPU 0 wait for each other, whole time slices at a time; 1
  // thread alone on the last CPU, mostly asleep, waits only from wake-up to running.
  RunResult r = run_offcpu("", {"sh", "-c",
                                std::string("'") + OFFCPU_WORKLOAD + " crowd 1.5 & " +
                                    OFFCPU_WORKLOAD + " lone 1.5 & wait'"});
  if (unavailable_) GTEST_SKIP() << GetParam() << " is not available here: " << r.output;
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const std::string crowd =
      std::to_string(static_cast<long>(workload_figure(r.output, "crowd_pid")));
  const std::string lone = std::to_string(static_cast<long>(workload_figure(r.output, "lone_pid")));
  double crowd_sum = 0, crowd_count = 0, lone_sum = 0, lone_count = 0, cpu0_count = 0;
  for (const json* rec : r.all("histogram", "runq_latency")) {
    const auto& labels = (*rec)["labels"];
    const auto& h = (*rec)["histogram"];
    if (labels.contains("pid") && labels["pid"] == crowd) {
      crowd_sum += h["sum"].get<double>();
      crowd_count += h["count"].get<double>();
    }
    if (labels.contains("pid") && labels["pid"] == lone) {
      lone_sum += h["sum"].get<double>();
      lone_count += h["count"].get<double>();
    }
    if (labels.contains("cpu") && labels["cpu"] == "0") cpu0_count += h["count"].get<double>();
  }
  double crowd_preempted = 0, crowd_preempted_any = 0;
  for (const json* rec : r.all("stack", "offcpu"))
    if ((*rec)["labels"]["pid"] == crowd && (*rec)["labels"]["reason"] == "preempted") {
      crowd_preempted_any += static_cast<double>(value(*rec, "offcpu_ns"));
      if (has_frame(*rec, "spin_in_crowd"))
        crowd_preempted += static_cast<double>(value(*rec, "offcpu_ns"));
    }
  double blocked_by_crowd = 0, blocked_all = 0, all_waits = 0;
  for (const json* rec : r.all("stack", "runq_blockers")) {
    blocked_all += static_cast<double>(value(*rec, "waits"));
    if (!has_frame(*rec, "spin_in_crowd")) continue;
    blocked_by_crowd += static_cast<double>(value(*rec, "waits"));
    EXPECT_EQ((*rec)["labels"]["pid"], crowd)
        << "the blocker is the task that ran: " << rec->dump();
  }
  for (const json* rec : r.all("histogram", "runq_latency"))
    if ((*rec)["labels"].contains("pid")) all_waits += (*rec)["histogram"]["count"].get<double>();
  const double crowd_mean = crowd_count ? crowd_sum / crowd_count : 0;
  const double lone_mean = lone_count ? lone_sum / lone_count : 0;
  // What the scheduler itself counted as each thread's run-queue wait (schedstat): on a
  // busy machine the lone thread waits behind other load too, so its own figure, not an
  // idle machine's, is the truth to meet.
  const double crowd_own = workload_figure(r.output, "crowd_run_delay_ns");
  const double lone_own = workload_figure(r.output, "lone_run_delay_ns");
  std::printf(
      "  [%s] crowd: %.0f run-queue waits, %.0f ms, %.2f ms each (its own: %.0f ms; preempted "
      "off-CPU %.0f ms); lone: %.0f waits, %.3f ms each (%.1f ms, its own: %.1f ms); CPU 0: %.0f "
      "waits; behind spin_in_crowd: %.0f of %.0f\n",
      GetParam(), crowd_count, crowd_sum / 1e6, crowd_mean / 1e6, crowd_own / 1e6,
      crowd_preempted / 1e6, lone_count, lone_mean / 1e6, lone_sum / 1e6, lone_own / 1e6,
      cpu0_count, blocked_by_crowd, blocked_all);
  // 3 threads on one CPU for 1.5 s: each waits about 2/3 of the time (3 s in all).
  EXPECT_GE(crowd_sum, 1.0e9);
  EXPECT_GE(crowd_count, 30);
  EXPECT_GE(lone_count, 30) << "the lone thread wakes ~150 times";
  // loupe times a wait from the wake-up (sched_waking) or the preemption to the switch
  // in; the scheduler from the enqueue to the arrival. So loupe finds at least the
  // scheduler's time (microseconds a wait apart on the host; it also holds a wake-up's
  // delivery to its CPU, an IPI, slow under emulation, and in an emulated kernel each
  // switch's own stack walks). Within each thread's own time off the CPU, for any reason
  // (wall minus CPU time): no wait can be longer.
  const double crowd_off = workload_figure(r.output, "crowd_off_cpu_ns");
  const double lone_off = workload_figure(r.output, "lone_off_cpu_ns");
  ASSERT_GE(crowd_own, 0) << r.output;
  ASSERT_GE(lone_own, 0) << r.output;
  ASSERT_GE(crowd_off, 0) << r.output;
  ASSERT_GE(lone_off, 0) << r.output;
  // A switch the program never saw (README "Switches the program did not see"; the
  // emulated guests under load miss several a run) takes its wait with it: counted, and
  // then only half of the scheduler's time is owed.
  double recovered = 0;
  for (const json* rec : r.all("metric", "missed_switch_ins_recovered"))
    recovered += (*rec)["metric"]["value"].get<double>();
  const double missed = recovered + health_value(r, "offcpu/missed_switch_outs");
  const double owed = missed > 0 ? 0.5 : 0.95;
  if (missed > 0) std::printf("  switches not seen (counted): %.0f\n", missed);
  EXPECT_GE(crowd_sum, owed * crowd_own - crowd_count * 50e3);
  EXPECT_LE(crowd_sum, crowd_off + crowd_count * 50e3) << "the crowd's time off the CPU";
  EXPECT_GE(lone_sum, owed * lone_own - lone_count * 50e3);
  EXPECT_LE(lone_sum, lone_off + lone_count * 50e3) << "the lone thread's time off the CPU";
  // Every crowd wait after the main thread pinned itself (and the one its migration to
  // CPU 0 makes) is on CPU 0.
  const double before_pin = workload_figure(r.output, "crowd_runs_before_pin");
  std::printf("  crowd runs before pinning: %.0f\n", before_pin);
  EXPECT_GE(cpu0_count, (crowd_count - std::max(before_pin, 0.0) - 1) * 0.9);
  // The crowd's waits are preemptions, most of them under spin_in_crowd's stack (a stack
  // the map refused, or a preemption in its start-up, leaves the rest elsewhere).
  EXPECT_GE(crowd_preempted_any, 0.8 * crowd_sum);
  EXPECT_GE(crowd_preempted, 0.5 * crowd_sum);
  // Every long wait behind a running task names that task (a wait on an idle CPU has no
  // blocker); the crowd's threads block one another when the machine is otherwise idle,
  // but under other load (or an emulated kernel's own threads) the task that held CPU 0
  // is often another: who it was is not asserted, only that it is named rightly.
  EXPECT_GT(blocked_all, 0);
  EXPECT_LE(blocked_all, all_waits);
}

TEST_P(OffcpuMechanisms, TimeStillOffTheCpuAtTheEndIsReportedInFlightUpToTheStop) {
  // The session ends (and stops its command, the shell) while the shell's second child
  // still sleeps: the child is not stopped, and its block has no end yet. It is in flight for
  // the time from its start to the session's stop, not to the final collect, which runs
  // after the detach and drain (under load, long enough for the sleeper to wake and be
  // reaped). The first child slept and was reaped before the end: never in flight.
  RunResult r = run_offcpu("",
                           {"sh", "-c",
                            "'sleep 0.2 & echo first_pid=$!; wait; echo start_ns=$(date +%s%N); "
                            "sleep 8 >/dev/null 2>&1 & wait'"},
                           "--duration 4");
  if (unavailable_) GTEST_SKIP() << GetParam() << " is not available here: " << r.output;
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const std::string first =
      std::to_string(static_cast<long>(workload_figure(r.output, "first_pid")));
  const double start = workload_figure(r.output, "start_ns");
  // (An emulated kernel takes a good part of a second to start the shell and its children,
  // and over two seconds beside two CPU hogs: hence a 4 s session.)
  ASSERT_GT(start, 0) << "the session ended before the second child started: " << r.output;
  double in_flight = 0, window_end = 0;
  for (const json* rec : r.all("stack", "offcpu_in_flight")) {
    EXPECT_NE((*rec)["labels"]["pid"], first) << "reaped before the end: " << rec->dump();
    if ((*rec)["labels"]["comm"] == "sleep" && (*rec)["labels"]["reason"] == "sleep") {
      in_flight += static_cast<double>(value(*rec, "offcpu_ns"));
      window_end = (*rec)["window"]["end_ns"].get<double>();
    }
  }
  std::printf(
      "  [%s] sleep 8 under a 4 s session: %.1f ms in flight at the end, %.1f ms "
      "from its start to the stop\n",
      GetParam(), in_flight / 1e6, (window_end - start) / 1e6);
  ASSERT_GT(window_end, start) << "no in-flight sleep: " << r.output;
  // It began once the shell had started sleep after `start` (a quarter second and more
  // when emulated): some time, and never more than from `start` to the stop.
  EXPECT_GT(in_flight, 0);
  // `start` was read before the shell started sleep: the block began after it.
  EXPECT_LE(in_flight, window_end - start);
}

TEST_P(OffcpuMechanisms, NoBlockLostBesideSessionsStartingAndStopping) {
  // Other sessions start and stop beside this one: now and then a switch of the workload
  // never reaches this session's program, more often so under this load (before the fix,
  // 1-4 of the sleeper's 100 blocks went missing in 4 runs of 6: README). A
  // missed switch-in is recovered at the thread's next switch-out from its CPU time; a
  // missed switch-out is counted. So the sleeper's 100 sleeps are 100 blocks, bar the
  // counted missed switch-outs, under sleep_in_sleeper unless the stack map refused their
  // user stack (counted), and their time is the workload's.
  const std::string churn = dir_ + "/churn.toml";
  std::ofstream(churn) << "[session]\noutput_dir = \"" << dir_
                       << "/churn\"\n[[plugins]]\nname = \"offcpu\"\nmechanism = \"" << GetParam()
                       << "\"\n[[sinks]]\nname = \"console\"\n";
  std::atomic<bool> done{false};
  std::atomic<int> churned{0}, refused{0};
  std::thread beside([&] {
    const std::string cmd = loupe_ + " run " + churn + " -- true >/dev/null 2>&1";
    while (!done.load()) {
      const int rc = std::system(cmd.c_str());
      if (rc == -1) break;
      // Only a session that loaded and attached its program churns the hook.
      ++(rc == 0 ? churned : refused);
    }
  });
  // One row per thread: the sleeper thread blocks in S only in its 100 sleeps, so its
  // rows hold them all, whether or not the stack map kept a block's user stack
  // (offcpu/user_stack_fail, counted); the other threads' sleeps and the main thread's
  // join stay on rows of their own.
  RunResult r = run_offcpu("per_thread = true\n", {OFFCPU_WORKLOAD, "blockers"});
  done = true;
  beside.join();
  if (unavailable_) GTEST_SKIP() << GetParam() << " is not available here: " << r.output;
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const std::string pid = std::to_string(static_cast<long>(workload_figure(r.output, "pid")));
  const std::string tid = std::to_string(static_cast<long>(workload_figure(r.output, "sleep_tid")));
  const double wall = workload_figure(r.output, "sleep_ns");
  const double want = wall - workload_figure(r.output, "sleep_cpu_ns");
  double sleep_ns = 0, asleep_ns = 0, sleep_blocks = 0, named_blocks = 0;
  for (const json* rec : r.all("stack", "offcpu")) {
    if ((*rec)["labels"]["pid"] != pid || (*rec)["labels"].value("tid", "") != tid) continue;
    // The workload's wall minus CPU time holds every wait of the span: its sleeps and, on a
    // machine this busy (sessions loading beside it), its preemptions within the function.
    const bool sleep = (*rec)["labels"]["reason"] == "sleep";
    const bool in_span = has_frame(*rec, "sleep_in_sleeper");
    if (sleep || in_span) sleep_ns += static_cast<double>(value(*rec, "offcpu_ns"));
    if (sleep) asleep_ns += static_cast<double>(value(*rec, "offcpu_ns"));
    if (!sleep) continue;
    sleep_blocks += static_cast<double>(value(*rec, "blocks"));
    if (in_span) named_blocks += static_cast<double>(value(*rec, "blocks"));
  }
  if (sleep_blocks == 0) std::printf("%s\n", r.output.c_str());
  const double missed_outs = health_value(r, "offcpu/missed_switch_outs");
  const double missed_out_ns = health_value(r, "offcpu/missed_out_ns");
  double recovered = 0;
  for (const json* rec : r.all("metric", "missed_switch_ins_recovered"))
    recovered += (*rec)["metric"]["value"].get<double>();
  std::printf(
      "  [%s] %d sessions beside it; sleeper: %.0f blocks (%.0f under sleep_in_sleeper), "
      "%.1f ms (the workload: %.1f ms); switch-ins missed and recovered: %.0f; switch-outs "
      "missed: %.0f (%.3f ms); user stacks refused: %.0f\n",
      GetParam(), churned.load(), sleep_blocks, named_blocks, sleep_ns / 1e6, want / 1e6, recovered,
      missed_outs, missed_out_ns / 1e6, health_value(r, "offcpu/user_stack_fail"));
  EXPECT_GT(churned.load(), 0) << refused.load() << " sessions beside it failed";
  EXPECT_LE(sleep_blocks, 100);
  EXPECT_GE(sleep_blocks, 100 - missed_outs);
  EXPECT_GE(named_blocks, sleep_blocks - health_value(r, "offcpu/user_stack_fail"));
  // The sleeps lie within the span: never more than its wall time. Its wall minus CPU time
  // is no upper bound in an emulated guest: a task's CPU clock there also runs while the
  // host has its vCPU descheduled (no steal accounting), so on a loaded machine the
  // workload's CPU time grew and its own "wall - CPU" fell 13 ms (1.2 %) below the sleeps
  // loupe saw. With the preemptions seen in the function, nothing of it is missing; a
  // preemption at the span's edge (tens of ms in an emulated guest) may reach past it, so
  // that sum is bounded from below only.
  EXPECT_LE(asleep_ns, wall + missed_out_ns)
      << "the span's CPU time: " << (wall - want) / 1e6 << " ms";
  EXPECT_GE(sleep_ns, 0.99 * want - missed_out_ns);
}

INSTANTIATE_TEST_SUITE_P(AllHooks, OffcpuMechanisms,
                         ::testing::Values("tp_btf", "raw_tp", "tracepoint"));

class OffcpuWall : public loupe::test::CliRun {};

TEST_F(OffcpuWall, OnAndOffCpuTimeShareOneFlameGraphInNanoseconds) {
  // profiles/wall.toml's shape: cpusample and offcpu, one folded file weighed by time_ns.
  RunResult r =
      run("[[plugins]]\nname = \"cpusample\"\nfrequency = 99\n"
          "[[plugins]]\nname = \"offcpu\"\n"
          "[[sinks]]\nname = \"folded\"\npath = \"wall.folded\"\nvalue = \"time_ns\"\n",
          {OFFCPU_WORKLOAD, "halves"});
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const double spin = workload_figure(r.output, "spin_cpu_ns");
  const double slept = workload_figure(r.output, "sleep_ns");
  std::ifstream in(dir_ + "/out/wall.folded");
  ASSERT_TRUE(in) << "no wall.folded";
  double on = 0, off = 0;
  std::string line;
  while (std::getline(in, line)) {
    const auto sp = line.rfind(' ');
    const double v = std::stod(line.substr(sp + 1));
    if (line.rfind("cpu;", 0) == 0 && line.find("spin_half") != std::string::npos) on += v;
    if (line.rfind("offcpu;", 0) == 0 && line.find("sleep_half") != std::string::npos) off += v;
  }
  std::printf(
      "  spin_half: %.0f ms on CPU (workload %.0f ms); sleep_half: %.0f ms off (workload "
      "%.0f ms)\n",
      on / 1e6, spin / 1e6, off / 1e6, slept / 1e6);
  // 99 Hz over 1 s of CPU: ~99 samples, so a sampling error of ~10 %. Under emulation,
  // more either way: the task's CPU clock also runs while the host has the vCPU
  // descheduled, and the timer that drives cpu-clock sampling fires once for the periods it
  // missed meanwhile (round 7, 6.12 under two hogs: 747 ms sampled of the 1000 ms the
  // workload's clock said); and the kernel adapts the period to hold the frequency, so a
  // sample stands for 1/99 s only on average (round 10, 6.12: 1374 ms). The units are what
  // this test is about: counts would be off by 10^7, not by a half.
  EXPECT_LE(on, 2.0 * spin);
  EXPECT_GE(on, 0.5 * spin);
  EXPECT_NEAR(off, slept, 0.05 * slept);
}

// Overflow contract (issue 27): room for one (process, stacks, reason, waker) row while the
// workload blocks in three functions of three threads. Every block that ended is in a row
// or counted in offcpu/keys_full (WARN, naming max_keys), with its time in offcpu/lost_ns,
// and the workload's own 160 blocking calls are among them.
class OffcpuBounds : public loupe::test::CliRun {};

TEST_F(OffcpuBounds, TinyKeyMapCountsEveryBlockItCannotKeep) {
  RunResult r =
      run("[[plugins]]\nname = \"offcpu\"\nmax_keys = 1\n", {OFFCPU_WORKLOAD, "blockers"});
  ASSERT_EQ(r.exit_code, 0) << r.output;
  double kept = 0, ended = -1;
  for (const auto& rec : r.records)
    if (rec.value("kind", "") == "metric" && rec.value("is_final", false)) {
      if (rec["name"] == "offcpu_blocks") kept += rec["metric"]["value"].get<double>();
      if (rec["name"] == "blocks_ended") ended = rec["metric"]["value"].get<double>();
    }
  ASSERT_GE(ended, 0) << r.output;
  const auto lost = static_cast<double>(r.expect_loss("offcpu/keys_full", "max_keys"));
  std::printf("  blocks: %.0f ended, %.0f kept, %.0f counted lost\n", ended, kept, lost);
  EXPECT_EQ(kept + lost, ended) << "kept " << kept << ", lost " << lost;
  EXPECT_GT(lost, 0);
  std::size_t rows = 0;
  for (const auto& rec : r.records)
    rows += rec.value("kind", "") == "stack" && rec.value("name", "") == "offcpu" &&
            rec.value("is_final", false);
  EXPECT_LE(rows, 1u);
  // 100 sleeps, 50 pipe reads, 10 vforks: each blocked at least once.
  EXPECT_GE(kept + lost, 160);
  EXPECT_GT(r.expect_loss("offcpu/lost_ns", "max_keys"), 0u);
}

// The map's room follows the live processes without waiting for a report: 60 processes in
// turn, each sleeping 20 ms, and no interval report (user space evicts nothing before the
// end). A first run with room for everything counts the keys: the shell's (it lives the
// whole run) and the most one child makes (an emulated guest's exec blocks at many more
// places than the host's). The second run gets room for the shell's and two children's
// keys, far less than all of them: each process's keys leave the map at its last switch,
// handed to user space with their totals (loupe/handover.bpf.h), so none is refused and
// every block is in the final report. Wakers off: the shell waiting for each child would
// make a key per child (its waker); kernel stacks off: fewer keys a process.
TEST_F(OffcpuBounds, AProcessKeysLeaveTheMapAtItsExitSoChurnWaitsForNoReport) {
  const std::string loop = "i=0; while [ $i -lt 60 ]; do sleep 0.02; i=$((i+1)); done";
  struct Seen {
    double kept = 0, ended = -1, handed = -1;
    std::map<std::string, std::size_t> keys;  // by pid
  };
  auto go = [&](std::size_t max_keys, std::string* shell) {
    RunResult r =
        run("[[plugins]]\nname = \"offcpu\"\nwakers = false\nkernel_stacks = false\n"
            "max_keys = " +
                std::to_string(max_keys) + "\n",
            {"sh", "-c", "'" + loop + "'"});
    EXPECT_EQ(r.exit_code, 0) << r.output;
    Seen s;
    for (const auto& rec : r.records) {
      if (!rec.value("is_final", false)) continue;
      if (rec.value("kind", "") == "metric") {
        if (rec["name"] == "offcpu_blocks") s.kept += rec["metric"]["value"].get<double>();
        if (rec["name"] == "blocks_ended") s.ended = rec["metric"]["value"].get<double>();
        if (rec["name"] == "keys_handed_over") s.handed = rec["metric"]["value"].get<double>();
      } else if (rec.value("kind", "") == "stack" && rec.value("name", "") == "offcpu") {
        ++s.keys[rec["labels"].value("pid", "")];
        if (shell && rec["labels"].value("comm", "") == "sh")
          *shell = rec["labels"].value("pid", "");
      }
    }
    const double lost = health_value(r, "offcpu/keys_full");
    std::printf(
        "  room for %zu keys: %zu processes blocked; blocks: %.0f ended, %.0f kept, "
        "%.0f refused; keys handed over at exit: %.0f\n",
        max_keys, s.keys.size(), s.ended, s.kept, lost, s.handed);
    EXPECT_EQ(s.kept + lost, s.ended);
    return std::make_pair(s, lost);
  };
  std::string shell;
  const auto [all, all_lost] = go(65536, &shell);
  ASSERT_EQ(all_lost, 0);
  const auto [total, room] = loupe::test::handover_room(all.keys, shell);
  ASSERT_GE(all.keys.size(), 50u) << "the loop's processes were not seen: the test proves nothing";
  ASSERT_LT(room * 2, total) << "room for half the keys or more: the test proves nothing";
  const auto [tight, lost] = go(room, nullptr);
  EXPECT_GE(tight.keys.size(), 50u);
  EXPECT_GE(tight.handed, static_cast<double>(tight.keys.size()) - 2)
      << "a key each, but the shell's";
  EXPECT_EQ(lost, 0) << "keys refused: the map held exited processes' keys";
}

class OffcpuBadInput : public loupe::test::CliRun {};

TEST_F(OffcpuBadInput, AnUnknownMechanismIsRefusedWithTheChoices) {
  RunResult r = run("[[plugins]]\nname = \"offcpu\"\nmechanism = \"kprobe\"\n", {"true"});
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.output.find("\"kprobe\" is not allowed (expected \"auto\", \"tp_btf\", \"raw_tp\" or "
                          "\"tracepoint\")"),
            std::string::npos)
      << r.output;
}

}  // namespace
