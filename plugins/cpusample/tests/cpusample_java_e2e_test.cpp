// SPDX-License-Identifier: Apache-2.0
//
// Java methods named in cpusample's stacks of a HotSpot JVM started without any flag: by
// default read from the VM's own structures (runtimes/hotspot: no attach, no signal, no
// perf map written); with [runtimes.hotspot] perf_map = true the session also asks the JVM for
// its perf map through its attach listener. TwoHot.java is compiled with javac at test
// time; without java and javac the tests skip.
#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <thread>

#include "cli_run.hpp"
#include "on_path.hpp"
#include "user_frames.hpp"

extern char** environ;

using loupe::test::CliRun;
using loupe::test::frame_str;
using loupe::test::RunResult;
using nlohmann::json;

namespace {

using loupe::test::on_path;

// Samples of the JVM's main thread (comm "java" like the process; its other threads have
// their own names, and the launcher's first thread only waits for it) and those whose
// stack names each method.
struct Split {
  std::int64_t main_thread = 0, heavy = 0, light = 0;
  std::string pid;                                // the JVM's, from the records
  std::uint64_t start_ns = 0, end_ns = 0;         // the session's window (realtime)
  std::map<std::string, std::int64_t> elsewhere;  // leaf of the rest, for the message
};

Split split_of(const RunResult& r) {
  Split s;
  for (const auto* rec : r.all("stack", "cpu")) {
    const auto& labels = (*rec)["labels"];
    if (labels.value("comm", "") != "java" || labels.value("tid", "") == labels.value("pid", ""))
      continue;
    s.pid = labels.value("pid", "");
    s.start_ns = (*rec)["window"].value("start_ns", std::uint64_t{0});
    s.end_ns = (*rec)["window"].value("end_ns", std::uint64_t{0});
    const std::int64_t n = (*rec)["stack"]["values"][0]["value"].get<std::int64_t>();
    s.main_thread += n;
    std::string named, leaf;
    for (const auto& f : (*rec)["stack"]["frames"]) {
      if (f.value("kind", "") == "kernel") continue;
      std::string sym = frame_str(f, "symbol");
      if (sym.empty()) sym = "?";
      if (leaf.empty()) leaf = sym + " (" + frame_str(f, "module") + ")";
      if (sym.find("TwoHot.heavy") != std::string::npos ||
          sym.find("TwoHot.light") != std::string::npos) {
        named = sym;
        break;
      }
    }
    if (named.find("heavy") != std::string::npos)
      s.heavy += n;
    else if (!named.empty())
      s.light += n;
    else
      s.elsewhere[leaf] += n;
  }
  return s;
}

// heavy()'s share of the two methods' CPU time by TwoHot's own clock, over the session's
// window.
double own_heavy_share(const std::vector<json>& said, const Split& s) {
  return loupe::test::own_share_over(said, "heavy_s", "light_s", s.start_ns, s.end_ns);
}

const json* health(const RunResult& r, const std::string& name) {
  for (const auto& rec : r.records)
    if (rec.value("kind", "") == "health" && rec.value("name", "") == name &&
        rec.value("is_final", false))
      return &rec;
  return nullptr;
}

class CpuSampleJava : public CliRun {
 protected:
  void SetUp() override {
    CliRun::SetUp();
    if (IsSkipped()) return;
    java_ = on_path("java");
    const std::string javac = on_path("javac");
    if (java_.empty() || javac.empty()) GTEST_SKIP() << "java or javac not on PATH";
    classes_ = std::string(JAVA_CLASSES_DIR) + "/" + std::to_string(::getpid());
    std::filesystem::create_directories(classes_);
    const std::string cmd = javac + " -d " + classes_ + " " + JAVA_SOURCE + " 2>&1";
    ASSERT_EQ(std::system(cmd.c_str()), 0) << cmd;
  }
  void TearDown() override {
    if (jvm_ > 0) {
      ::kill(jvm_, SIGKILL);
      ::waitpid(jvm_, nullptr, 0);
    }
    if (!classes_.empty()) std::filesystem::remove_all(classes_);
    // The map the JVM wrote stays after it, as with jcmd: not in a test.
    for (const auto& pid : jvm_pids_) std::filesystem::remove("/tmp/perf-" + pid + ".map");
    CliRun::TearDown();
  }

  std::vector<std::string> java(const std::string& seconds, const std::string& flag = "") const {
    std::vector<std::string> cmd = {java_};
    if (!flag.empty()) cmd.push_back(flag);
    for (const char* a : {"-cp", classes_.c_str(), "TwoHot", seconds.c_str()}) cmd.push_back(a);
    return cmd;
  }

  // Asserts the share of the main thread's samples in the two methods, and their split
  // against the one TwoHot timed itself (`own`, heavy's share of the two): 2:1 by
  // iterations, but C1 and C2 code of each side run at different times, so the JIT decides
  // (a fixed bound on the ratio failed a loaded run at 3.24 with every sample named).
  static void expect_methods_named(const Split& s, double own) {
    std::string rest;
    for (const auto& [leaf, n] : s.elsewhere) rest += "\n    " + std::to_string(n) + " " + leaf;
    const double share = s.heavy + s.light ? double(s.heavy) / double(s.heavy + s.light) : 0.0;
    std::printf(
        "  main thread: %lld samples, heavy %lld, light %lld (%.0f%% named): heavy %.1f%% of "
        "the two (its own clock: %.1f%%)%s\n",
        (long long)s.main_thread, (long long)s.heavy, (long long)s.light,
        s.main_thread ? 100.0 * double(s.heavy + s.light) / double(s.main_thread) : 0.0,
        100 * share, 100 * own, rest.c_str());
    ASSERT_GE(s.main_thread, 30) << "too few samples of the JVM's main thread";
    EXPECT_GE((s.heavy + s.light) * 100, s.main_thread * 70);
    ASSERT_GT(own, 0) << "TwoHot said nothing of its own time";
    EXPECT_NEAR(share, own, 0.05);
  }

  Split split(const RunResult& r) {
    Split s = split_of(r);
    if (!s.pid.empty()) jvm_pids_.push_back(s.pid);
    return s;
  }

  std::string java_, classes_;
  pid_t jvm_ = -1;
  std::vector<std::string> jvm_pids_;
};

const std::string kProfile = "[[plugins]]\nname = \"cpusample\"\nper_thread = true\n";
// The attach path, asked for explicitly: the HotSpot runtime's own table, after [session].
const std::string kAttach = "[runtimes.hotspot]\nperf_map = true\n";

// Named from the VM's structures: the runtime's row counts the JVM, and nothing was asked
// of it (no attach row, no perf map file: no SIGQUIT, no socket).
void expect_read_without_attach(const RunResult& r, const std::string& pid) {
  const json* h = health(r, "hotspot_processes");
  ASSERT_NE(h, nullptr) << r.output;
  std::printf("  %s\n", (*h)["health"].value("message", "").c_str());
  EXPECT_GE((*h)["health"].value("value", 0.0), 1.0) << h->dump();
  EXPECT_EQ(health(r, "jvm_perf_map"), nullptr) << r.output;
  EXPECT_EQ(health(r, "jvm_perf_map_failed"), nullptr) << r.output;
  EXPECT_FALSE(std::filesystem::exists("/tmp/perf-" + pid + ".map"))
      << "a perf map was written: the JVM was attached to";
}

}  // namespace

TEST_F(CpuSampleJava, CommandJvmMethodsAreNamedFromTheVmWithoutAttach) {
  auto r = run(kProfile, java("6"));
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const Split s = split(r);
  expect_methods_named(s, own_heavy_share(loupe::test::json_lines(r.output), s));
  expect_read_without_attach(r, s.pid);
}

// A method C2 compiled into its caller has no frame on the stack; its time is its own in
// the VM's debug info. Java Flight Recorder, run on the same program, is the truth the
// share is held to.
TEST_F(CpuSampleJava, InlinedMethodsAreFramesOfTheirOwnAsJfrSaysThem) {
  auto r = run(kProfile, {java_, "-cp", classes_, "Inlined", "5"});
  ASSERT_EQ(r.exit_code, 0) << r.output;
  std::int64_t main_thread = 0, mix_in_outer = 0, inlined = 0;
  for (const auto* rec : r.all("stack", "cpu")) {
    const auto& labels = (*rec)["labels"];
    if (labels.value("comm", "") != "java" || labels.value("tid", "") == labels.value("pid", ""))
      continue;
    const std::int64_t n = (*rec)["stack"]["values"][0]["value"].get<std::int64_t>();
    main_thread += n;
    std::vector<const json*> java;
    for (const auto& f : (*rec)["stack"]["frames"])
      if (f.value("kind", "") == "java") java.push_back(&f);
    // The innermost Java frame is mix, its direct caller outer.
    if (java.size() >= 2 && (*java[0]).value("symbol", "") == "Inlined.mix" &&
        (*java[1]).value("symbol", "") == "Inlined.outer") {
      mix_in_outer += n;
      // Frames expanded from one compiled frame carry its one address.
      if ((*java[0]).value("address", 0ull) == (*java[1]).value("address", 0ull)) inlined += n;
    }
  }
  std::printf(
      "  main thread: %lld samples, mix in outer %lld, of which from one compiled frame %lld\n",
      (long long)main_thread, (long long)mix_in_outer, (long long)inlined);
  ASSERT_GE(main_thread, 100) << r.output;
  EXPECT_GE(inlined * 2, mix_in_outer) << "mix was not inlined: the test proves nothing";
  const double share = double(mix_in_outer) / double(main_thread);
  // Java Flight Recorder's samples of the same program.
  const std::string jfr = on_path("jfr");
  if (jfr.empty()) GTEST_SKIP() << "no jfr on PATH: the share is not compared";
  const std::string rec_file = classes_ + "/inlined.jfr", out = classes_ + "/inlined.txt";
  const std::string cmd = java_ + " -XX:StartFlightRecording=filename=" + rec_file +
                          ",settings=profile -cp " + classes_ + " Inlined 5 >/dev/null 2>&1 && " +
                          jfr + " print --events jdk.ExecutionSample --stack-depth 2 " + rec_file +
                          " > " + out;
  ASSERT_EQ(std::system(cmd.c_str()), 0) << cmd;
  std::ifstream in(out);
  std::int64_t samples = 0, mix = 0;
  std::string line;
  bool top = false;
  for (; std::getline(in, line);) {
    if (line.find("jdk.ExecutionSample") != std::string::npos) {
      ++samples;
      top = true;
    } else if (top && line.find("line:") != std::string::npos) {
      mix += line.find("Inlined.mix(") != std::string::npos;
      top = false;
    }
  }
  ASSERT_GE(samples, 100) << "JFR recorded too few samples";
  const double truth = double(mix) / double(samples);
  std::printf("  mix's share: loupe %.1f%%, Java Flight Recorder %.1f%% (%lld samples)\n",
              100 * share, 100 * truth, (long long)samples);
  EXPECT_NEAR(share, truth, 0.07);
}

TEST_F(CpuSampleJava, CommandJvmMethodsAreNamedFromItsPerfMapWhenAsked) {
  auto r = run(kProfile, java("6"), "", kAttach);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const Split s = split(r);
  expect_methods_named(s, own_heavy_share(loupe::test::json_lines(r.output), s));
  const json* h = health(r, "jvm_perf_map");
  ASSERT_NE(h, nullptr) << r.output;
  std::printf("  %s\n", (*h)["health"].value("message", "").c_str());
  EXPECT_NE((*h)["health"].value("message", "").find("pid " + s.pid + ":"), std::string::npos)
      << h->dump();
  EXPECT_EQ(health(r, "jvm_perf_map_failed"), nullptr) << r.output;
}

TEST_F(CpuSampleJava, RunningJvmGivenByPidIsNamedToo) {
  // What it says of its own time goes to a file, read after the session.
  const std::string said = classes_ + "/said.jsonl";
  jvm_ = loupe::test::spawn_to_file(java("40"), said);
  ASSERT_GT(jvm_, 0);
  // Long enough for both methods to be compiled before the session begins.
  std::this_thread::sleep_for(std::chrono::seconds(2));
  auto r = run(kProfile, {}, "--pid " + std::to_string(jvm_) + " --duration 6");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const Split s = split(r);
  EXPECT_EQ(s.pid, std::to_string(jvm_));
  // Its next report, 200 ms on, closes the window.
  std::this_thread::sleep_for(std::chrono::milliseconds(400));
  expect_methods_named(s,
                       own_heavy_share(loupe::test::json_lines(loupe::test::file_text(said)), s));
  expect_read_without_attach(r, std::to_string(jvm_));
}

// A JVM that answered once and then stops answering (stopped here; on a loaded machine one
// exiting, or slower than the bound) keeps the map it wrote, and the last failed ask is
// said as what stays unnamed, not as "no perf map".
TEST_F(CpuSampleJava, AJvmThatStopsAnsweringKeepsItsMapAndTheStaleOneIsSaid) {
  const auto cmd = java("40");
  std::vector<char*> argv;
  for (const auto& a : cmd) argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);
  posix_spawn_file_actions_t fa;
  ::posix_spawn_file_actions_init(&fa);
  ::posix_spawn_file_actions_addopen(&fa, STDOUT_FILENO, "/dev/null", O_WRONLY, 0);
  const int spawned = ::posix_spawn(&jvm_, argv[0], &fa, nullptr, argv.data(), environ);
  ::posix_spawn_file_actions_destroy(&fa);
  ASSERT_EQ(spawned, 0);
  jvm_pids_.push_back(std::to_string(jvm_));
  // Stopped once its first map is written (the session asks when it finds the JVM). A map
  // already there was left by an earlier process of the same pid (pids wrap within a CI
  // run beside the fork loops; the JVM writes only when asked): gone before the session,
  // or the stopper would stop the JVM before it was ever asked.
  const std::string map = "/tmp/perf-" + std::to_string(jvm_) + ".map";
  std::filesystem::remove(map);
  std::this_thread::sleep_for(std::chrono::seconds(2));
  bool stopped = false;
  std::thread stopper([&] {
    const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(20);
    while (!std::filesystem::exists(map) && std::chrono::steady_clock::now() < until)
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    stopped = std::filesystem::exists(map) && ::kill(jvm_, SIGSTOP) == 0;
  });
  auto r = run(kProfile, {}, "--pid " + std::to_string(jvm_) + " --duration 4", kAttach);
  stopper.join();
  ::kill(jvm_, SIGCONT);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  ASSERT_TRUE(stopped) << "no perf map written within 20 s\n" << r.output;
  const json* ok = health(r, "jvm_perf_map");
  ASSERT_NE(ok, nullptr) << r.output;
  EXPECT_GE((*ok)["health"].value("value", 0.0), 1.0) << ok->dump();
  EXPECT_EQ(health(r, "jvm_perf_map_failed"), nullptr) << r.output;
  const json* stale = health(r, "jvm_perf_map_stale");
  ASSERT_NE(stale, nullptr) << r.output;
  const auto& hv = (*stale)["health"];
  std::printf("  %s\n  %s\n", (*ok)["health"].value("message", "").c_str(),
              hv.value("message", "").c_str());
  EXPECT_EQ(hv.value("severity", ""), "warn");
  EXPECT_NE(hv.value("message", "").find("pid " + std::to_string(jvm_) + ":"), std::string::npos)
      << stale->dump();
  EXPECT_NE(hv.value("message", "").find("within the bound"), std::string::npos) << stale->dump();
}

TEST_F(CpuSampleJava, JvmWithAttachDisabledIsAHealthRecordNotAFailure) {
  const auto t0 = std::chrono::steady_clock::now();
  auto r = run(kProfile, java("3", "-XX:+DisableAttachMechanism"), "", kAttach);
  const double took = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const Split s = split(r);
  const json* h = health(r, "jvm_perf_map_failed");
  ASSERT_NE(h, nullptr) << r.output;
  const auto& hv = (*h)["health"];
  std::printf("  %s (session %.1f s)\n", hv.value("message", "").c_str(), took);
  EXPECT_EQ(hv.value("severity", ""), "warn");
  EXPECT_NE(hv.value("message", "").find("pid " + s.pid + ":"), std::string::npos) << h->dump();
  EXPECT_NE(hv.value("message", "").find("DisableAttachMechanism"), std::string::npos) << h->dump();
  EXPECT_EQ(r.output.find("Full thread dump"), std::string::npos)
      << "the JVM was sent SIGQUIT although its attach is disabled";
}
