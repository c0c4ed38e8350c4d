// SPDX-License-Identifier: Apache-2.0
//
// The session's one reader of process mappings (ProcessWatch): one read of /proc/PID/maps
// serves every asker until the process changes, and system-wide the kernel's records say
// which processes changed, exec'd and ended, so nothing polls. The processes are real
// (Debian's sleep and sh), the records the kernel's own.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <set>
#include <string>
#include <thread>

#include "symbols/process_watch.hpp"

namespace loupe {
namespace {

// `argv` started under fork+exec; its pid.
pid_t spawn(const char* path, const char* arg) {
  const pid_t pid = ::fork();
  if (pid == 0) {
    ::execl(path, path, arg, static_cast<char*>(nullptr));
    ::_exit(127);
  }
  return pid;
}

TEST(ProcessWatch, OneReadServesEveryAskerUntilTheProcessChanges) {
  ProcessWatch watch;
  const pid_t pid = spawn("/bin/sleep", "5");
  std::this_thread::sleep_for(std::chrono::milliseconds(100));  // exec'd and loaded
  int err = 0;
  const auto first = watch.maps(static_cast<std::uint32_t>(pid), 0, &err);
  ASSERT_NE(first, nullptr) << err;
  bool sleep_mapped = false;
  for (const auto& m : first->maps) sleep_mapped |= m.executable && m.path.ends_with("/sleep");
  EXPECT_TRUE(sleep_mapped) << "sleep's own code is not among its mappings";
  EXPECT_NE(first->exe_id, 0u);
  // A second asker with no read of its own: served the same read.
  const auto second = watch.maps(static_cast<std::uint32_t>(pid), 0, &err);
  EXPECT_EQ(second.get(), first.get());
  // An asker who holds that read wants a newer one: read again.
  const auto newer = watch.maps(static_cast<std::uint32_t>(pid), first->generation, &err);
  ASSERT_NE(newer, nullptr);
  EXPECT_GT(newer->generation, first->generation);
  // Said to have changed: the next ask reads, whatever it holds.
  watch.changed(static_cast<std::uint32_t>(pid));
  const auto after = watch.maps(static_cast<std::uint32_t>(pid), 0, &err);
  EXPECT_GT(after->generation, newer->generation);
  auto c = watch.counters();
  EXPECT_EQ(c.reads, 3u);
  EXPECT_EQ(c.shared, 1u);
  ::kill(pid, SIGKILL);
  ::waitpid(pid, nullptr, 0);
  EXPECT_EQ(watch.maps(static_cast<std::uint32_t>(pid), ProcessWatch::kNow, &err), nullptr);
  EXPECT_TRUE(err == ENOENT || err == ESRCH) << err;
  // A kernel thread lists nothing: read, empty, not "gone" (read again at every tick, a
  // system-wide session's kernel threads were most of an idle agent's work).
  const auto kthreadd = watch.maps(2, 0, &err);
  ASSERT_NE(kthreadd, nullptr) << "pid 2 (kthreadd): " << err;
  EXPECT_TRUE(kthreadd->maps.empty());
}

TEST(ProcessWatch, SystemWideRecordsSayWhatExecdMappedAndEnded) {
  ProcessWatch watch;
  if (Status st = watch.follow_system(); !st) {
    if (::geteuid() != 0) GTEST_SKIP() << "needs root (CAP_PERFMON): " << st.error();
    FAIL() << st.error();
  }
  // A shell that runs a command in a child of its own and ends: a fork, an exec, the
  // loader's code mappings, two exits, all in the records.
  const pid_t cmd = ::fork();
  if (cmd == 0) {
    ::execl("/bin/sh", "sh", "-c", "/bin/true; /bin/true", static_cast<char*>(nullptr));
    ::_exit(127);
  }
  ::waitpid(cmd, nullptr, 0);
  std::set<std::uint32_t> forked, execed, exited;
  std::set<std::string> mapped;
  bool lost = false;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (std::chrono::steady_clock::now() < deadline &&
         !exited.count(static_cast<std::uint32_t>(cmd))) {
    watch.poll([&](const ProcessWatch::Change& c) {
      using Kind = ProcessWatch::Change::Kind;
      switch (c.kind) {
        case Kind::kForked: forked.insert(c.pid); break;
        case Kind::kExeced: execed.insert(c.pid); break;
        case Kind::kMapped:
          if (c.pid == static_cast<std::uint32_t>(cmd) && c.map) mapped.insert(c.map->path);
          break;
        case Kind::kExited: exited.insert(c.pid); break;
        case Kind::kLost: lost = true; break;
      }
    });
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  const auto cpid = static_cast<std::uint32_t>(cmd);
  EXPECT_TRUE(forked.count(cpid)) << "no fork record of pid " << cpid;
  EXPECT_TRUE(execed.count(cpid)) << "no exec record of pid " << cpid;
  EXPECT_TRUE(exited.count(cpid)) << "no exit record of pid " << cpid
                                  << (lost ? " (records lost)" : "");
  bool sh_code = false, libc = false;
  for (const auto& p : mapped) {
    sh_code |= p.ends_with("/dash") || p.ends_with("/sh");
    libc |= p.find("libc.so") != std::string::npos;
  }
  EXPECT_TRUE(sh_code && libc) << "the shell's code mappings: " << mapped.size() << " file(s)";
  // Its /bin/true children came and went too, without anyone reading their maps.
  EXPECT_GE(exited.size(), 3u);
  EXPECT_EQ(watch.counters().reads, 0u);
  EXPECT_TRUE(watch.counters().following);
}

}  // namespace
}  // namespace loupe
