// SPDX-License-Identifier: Apache-2.0
//
// jvm_command() against a real HotSpot JVM: the listener's start, Compiler.perfmap and the
// map it writes, an error answer, and the helper that connects with the credentials of a
// JVM of another user. TwoHot.java (cpusample's Java workload) is compiled with javac at
// test time; without java and javac the tests skip.
#include "hotspot/jvm_attach.hpp"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>

#include "on_path.hpp"

namespace {

using loupe::JvmAttachError;
using loupe::JvmAttachOptions;
using namespace std::chrono_literals;

// Whether `pid` maps libjvm.so yet (the test's own look: loupe learns it from the session's
// one read of the maps).
bool maps_libjvm(pid_t pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/maps");
  std::string line;
  while (std::getline(in, line))
    if (line.ends_with("/libjvm.so")) return true;
  return false;
}

using loupe::test::on_path;

class JvmAttach : public ::testing::Test {
 protected:
  void SetUp() override {
    java_ = on_path("java");
    const std::string javac = on_path("javac");
    if (java_.empty() || javac.empty()) GTEST_SKIP() << "java or javac not on PATH";
    classes_ = std::string(JAVA_CLASSES_DIR) + "/attach-" + std::to_string(::getpid());
    std::filesystem::create_directories(classes_);
    const std::string cmd = javac + " -d " + classes_ + " " + JAVA_SOURCE + " 2>&1";
    ASSERT_EQ(std::system(cmd.c_str()), 0) << cmd;
    ::chmod(classes_.c_str(), 0755);
  }
  void TearDown() override {
    if (jvm_ > 0) {
      ::kill(jvm_, SIGKILL);
      ::waitpid(jvm_, nullptr, 0);
      std::filesystem::remove(perf_map());
    }
    if (!classes_.empty()) std::filesystem::remove_all(classes_);
  }

  // Starts `java TwoHot 60` (as `uid` when not -1, in /tmp), then waits until it is ready
  // to be attached: it maps libjvm.so and catches SIGQUIT.
  void start_jvm(uid_t uid = static_cast<uid_t>(-1)) {
    jvm_ = ::fork();
    ASSERT_GE(jvm_, 0);
    if (jvm_ == 0) {
      if (::chdir("/tmp") != 0) ::_exit(126);
      if (uid != static_cast<uid_t>(-1) && (::setgid(uid) != 0 || ::setuid(uid) != 0)) ::_exit(126);
      ::execl(java_.c_str(), java_.c_str(), "-cp", classes_.c_str(), "TwoHot", "60", nullptr);
      ::_exit(127);
    }
    for (int i = 0; i < 1000; ++i) {
      std::ifstream status("/proc/" + std::to_string(jvm_) + "/status");
      std::string line;
      while (std::getline(status, line))
        if (line.starts_with("SigCgt:")) {
          unsigned long long mask = std::stoull(line.substr(7), nullptr, 16);
          if (mask & (1ull << (SIGQUIT - 1)) && maps_libjvm(jvm_)) return;
        }
      std::this_thread::sleep_for(10ms);
    }
    FAIL() << "the JVM did not become ready in 10 s";
  }

  std::string perf_map() const { return "/tmp/perf-" + std::to_string(jvm_) + ".map"; }

  std::string java_, classes_;
  pid_t jvm_ = -1;
};

TEST_F(JvmAttach, PerfmapIsWrittenAndTheListenerIsReused) {
  start_jvm();
  std::this_thread::sleep_for(1500ms);  // heavy() and light() compiled
  JvmAttachOptions opts;
  opts.timeout = 20s;  // a hang bound: beside other JVMs starting, 5 s was passed
  auto first = loupe::jvm_command(jvm_, "Compiler.perfmap", opts);
  ASSERT_TRUE(first) << first.error();
  EXPECT_TRUE(first->started_listener);
  EXPECT_FALSE(first->through_helper);
  auto second = loupe::jvm_command(jvm_, "Compiler.perfmap", opts);
  ASSERT_TRUE(second) << second.error();
  EXPECT_FALSE(second->started_listener);
  std::printf("  Compiler.perfmap: %.1f ms with the listener's start, %.1f ms after\n",
              first->took.count() / 1000.0, second->took.count() / 1000.0);
  std::stringstream map;
  map << std::ifstream(perf_map()).rdbuf();
  EXPECT_NE(map.str().find(" long TwoHot.heavy(long)\n"), std::string::npos) << perf_map();
  EXPECT_NE(map.str().find(" Interpreter\n"), std::string::npos)
      << "the template interpreter's blob, for interpreted frames";
}

// A JVM killed without cleanup leaves /tmp/.java_pid<pid>; the next process given that pid
// must not be asked through it (connect would be refused: CI met this once, pid reuse).
TEST_F(JvmAttach, ASocketLeftByAnEarlierProcessOfTheSamePidIsNotTrusted) {
  start_jvm();
  const std::string path = "/tmp/.java_pid" + std::to_string(jvm_);
  int fd = ::socket(AF_UNIX, SOCK_STREAM, 0);
  ASSERT_GE(fd, 0);
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  std::snprintf(addr.sun_path, sizeof(addr.sun_path), "%s", path.c_str());
  ASSERT_EQ(::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)), 0) << path;
  ::close(fd);  // bound, never listening: what a killed JVM leaves
  const timespec before_boot[2] = {{1, 0}, {1, 0}};
  ASSERT_EQ(::utimensat(AT_FDCWD, path.c_str(), before_boot, 0), 0);
  JvmAttachOptions opts;
  opts.timeout = 20s;
  auto r = loupe::jvm_command(jvm_, "Compiler.perfmap", opts);
  ASSERT_TRUE(r) << r.error();
  EXPECT_TRUE(r->started_listener) << "the leftover was taken for the JVM's listener";
}

TEST_F(JvmAttach, AnUnknownCommandIsTheJvmsOwnError) {
  start_jvm();
  auto r = loupe::jvm_command(jvm_, "No.such_command");
  ASSERT_FALSE(r);
  EXPECT_EQ(r.code(), static_cast<int>(JvmAttachError::kFailed));
  EXPECT_NE(r.error().find("Unknown diagnostic command"), std::string::npos) << r.error();
}

TEST_F(JvmAttach, NotAJvmIsNeverSignalled) {
  pid_t sleeper = ::fork();
  ASSERT_GE(sleeper, 0);
  if (sleeper == 0) {
    ::execl("/bin/sleep", "sleep", "10", nullptr);
    ::_exit(127);
  }
  std::this_thread::sleep_for(100ms);
  auto r = loupe::jvm_command(sleeper, "Compiler.perfmap");
  EXPECT_EQ(r.code(), static_cast<int>(JvmAttachError::kNotReady)) << r.error();
  EXPECT_EQ(::waitpid(sleeper, nullptr, WNOHANG), 0) << "sleep was killed";
  ::kill(sleeper, SIGKILL);
  ::waitpid(sleeper, nullptr, 0);
}

}  // namespace
