// SPDX-License-Identifier: Apache-2.0
//
// The core's process-tree tracker in the real kernel: forks of a member join, forks of
// others do not, threads do not take entries, exits leave, a full map is counted, and the
// /proc seeding finds descendants that predate it. Every hook flavour the kernel has.
#include <gtest/gtest.h>
#include <pthread.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <functional>
#include <memory>
#include <thread>

#include "kernel/process_tree.hpp"
#include "loupe/features.hpp"

namespace {

using loupe::ProcessTree;

// A child that forks `n` grandchildren which exit at once, then waits for a byte on `go`
// before doing so (so the test can put it in the tree first).
pid_t forking_child(int n, int go_read) {
  pid_t c = fork();
  if (c == 0) {
    char b;
    if (read(go_read, &b, 1) != 1) _exit(3);
    for (int i = 0; i < n; ++i) {
      pid_t g = fork();
      if (g == 0) _exit(0);
      waitpid(g, nullptr, 0);
    }
    // A thread: same tgid, no entry of its own.
    std::thread([] {}).join();
    _exit(0);
  }
  return c;
}

class Tracker : public ::testing::TestWithParam<const char*> {
 protected:
  void SetUp() override {
    if (geteuid() != 0) GTEST_SKIP() << "needs root: loads BPF programs";
    auto r = features_.get(GetParam());
    if (!r.available) GTEST_SKIP() << GetParam() << ": " << r.reason;
  }
  std::unique_ptr<ProcessTree> start(std::uint32_t max = 64) {
    auto t = ProcessTree::start(features_, {max, GetParam()});
    EXPECT_TRUE(t) << t.error();
    if (!t) return nullptr;
    EXPECT_EQ(t.value()->mechanism(), GetParam());
    return std::move(t).value();
  }
  loupe::KernelFeatureProber features_;
};

TEST_P(Tracker, ForksOfMembersJoinAndExitsLeave) {
  auto t = start();
  ASSERT_TRUE(t);
  int go[2];
  ASSERT_EQ(pipe(go), 0);
  pid_t c = forking_child(5, go[0]);
  loupe::Status added = t->add_root(c);
  ASSERT_TRUE(added) << added.error();
  // A process outside the tree forks too: it must not join.
  pid_t outsider = fork();
  if (outsider == 0) {
    pid_t g = fork();
    if (g == 0) _exit(0);
    waitpid(g, nullptr, 0);
    _exit(0);
  }
  waitpid(outsider, nullptr, 0);
  ASSERT_EQ(write(go[1], "g", 1), 1);
  int st = 0;
  waitpid(c, &st, 0);
  ASSERT_TRUE(WIFEXITED(st) && WEXITSTATUS(st) == 0);
  int forks = 0, exits = 0;
  std::function<void(const loupe_tree_event&)> on = [&](const loupe_tree_event& ev) {
    forks += ev.kind == LOUPE_TREE_FORK;
    exits += ev.kind == LOUPE_TREE_EXIT;
  };
  t->poll(on);
  auto n = t->counters();
  // Classic tracepoints name only the new task's thread id: there the thread joins (and
  // leaves on its own exit without counting as a process leaving).
  const bool tp = std::strcmp(GetParam(), "tracepoint") == 0;
  EXPECT_EQ(n.joined, tp ? 6u : 5u);
  EXPECT_EQ(n.left, 6u);  // the 5 grandchildren and the root
  EXPECT_EQ(n.overflow, 0u);
  EXPECT_EQ(n.members, 0u);  // everyone left; the thread never had an entry (tgid-keyed)
  EXPECT_EQ(forks, tp ? 6 : 5);
  EXPECT_EQ(exits, 6);
  EXPECT_FALSE(t->contains(outsider));
  close(go[0]);
  close(go[1]);
}

TEST_P(Tracker, AFullMapIsCountedNotSilent) {
  auto t = start(3);  // the root and two children
  ASSERT_TRUE(t);
  int go[2];
  ASSERT_EQ(pipe(go), 0);
  // Children that stay alive until killed, so the map fills.
  pid_t c = fork();
  if (c == 0) {
    char b;
    if (read(go[0], &b, 1) != 1) _exit(3);
    pid_t kids[6];
    for (auto& k : kids) {
      k = fork();
      if (k == 0) {
        pause();
        _exit(0);
      }
    }
    if (read(go[0], &b, 1) != 1) _exit(3);
    for (auto k : kids) {
      kill(k, SIGKILL);
      waitpid(k, nullptr, 0);
    }
    _exit(0);
  }
  loupe::Status added = t->add_root(c);
  ASSERT_TRUE(added) << added.error();
  ASSERT_EQ(write(go[1], "g", 1), 1);
  // Wait until the six forks happened (the counters say so).
  for (int i = 0; i < 500; ++i) {
    auto n = t->counters();
    if (n.joined + n.overflow >= 6) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  auto n = t->counters();
  EXPECT_EQ(n.joined, 2u);
  EXPECT_EQ(n.overflow, 4u);
  EXPECT_EQ(n.members, 3u);
  ASSERT_EQ(write(go[1], "g", 1), 1);
  waitpid(c, nullptr, 0);
  close(go[0]);
  close(go[1]);
}

TEST_P(Tracker, SeedingFromProcFindsDescendantsThatPredateTheTracker) {
  // child -> grandchild, both alive before the tracker exists.
  int ready[2];
  ASSERT_EQ(pipe(ready), 0);
  pid_t c = fork();
  if (c == 0) {
    pid_t g = fork();
    if (g == 0) {
      pause();
      _exit(0);
    }
    if (write(ready[1], &g, sizeof(g)) != sizeof(g)) _exit(3);
    pause();
    _exit(0);
  }
  pid_t g = 0;
  ASSERT_EQ(read(ready[0], &g, sizeof(g)), static_cast<ssize_t>(sizeof(g)));
  auto t = start();
  ASSERT_TRUE(t);
  loupe::Status added = t->add_root(c);
  ASSERT_TRUE(added) << added.error();
  EXPECT_EQ(t->seed_from_proc(c), 1u);
  EXPECT_TRUE(t->contains(c));
  EXPECT_TRUE(t->contains(g));
  EXPECT_FALSE(t->contains(getpid()));
  EXPECT_EQ(t->counters().seeded, 2u);
  kill(g, SIGKILL);
  kill(c, SIGKILL);
  waitpid(c, nullptr, 0);
  close(ready[0]);
  close(ready[1]);
}

INSTANTIATE_TEST_SUITE_P(Flavours, Tracker, ::testing::Values("tp_btf", "raw_tp", "tracepoint"),
                         [](const auto& info) { return std::string(info.param); });

}  // namespace
