// SPDX-License-Identifier: Apache-2.0
//
// The /proc side of the process tree: parent links read from a fake /proc, descendants.
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>

#include "kernel/process_tree.hpp"

namespace fs = std::filesystem;
using loupe::descendants_of;
using loupe::read_parent_links;

namespace {

class FakeProc : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/loupe-proc-XXXXXX";
    ASSERT_NE(mkdtemp(tmpl), nullptr);
    root_ = tmpl;
  }
  void TearDown() override { fs::remove_all(root_); }
  void add(int pid, const std::string& comm, int ppid) {
    fs::create_directories(root_ + "/" + std::to_string(pid));
    std::ofstream(root_ + "/" + std::to_string(pid) + "/stat")
        << pid << " (" << comm << ") S " << ppid << " " << pid << " 0 0 -1 4194560\n";
  }
  std::string root_;
};

TEST_F(FakeProc, ParentLinksSurviveCommsWithSpacesAndParentheses) {
  add(1, "init", 0);
  add(10, "a b) S 99 (x", 1);  // a comm that looks like more fields
  add(11, "w", 10);
  fs::create_directories(root_ + "/self");  // not a pid
  fs::create_directories(root_ + "/12");    // exited between readdir and open: no stat
  auto links = read_parent_links(root_);
  std::sort(links.begin(), links.end());
  ASSERT_EQ(links.size(), 3u);
  EXPECT_EQ(links[1], (std::pair<pid_t, pid_t>{10, 1}));
  EXPECT_EQ(links[2], (std::pair<pid_t, pid_t>{11, 10}));
}

TEST(Descendants, WholeSubtreeParentsFirstNotTheRootNorOthers) {
  std::vector<std::pair<pid_t, pid_t>> links = {{1, 0},   {10, 1}, {11, 10}, {12, 10},
                                                {13, 11}, {20, 1}, {21, 20}, {14, 13}};
  auto d = descendants_of(10, links);
  std::vector<pid_t> sorted = d;
  std::sort(sorted.begin(), sorted.end());
  EXPECT_EQ(sorted, (std::vector<pid_t>{11, 12, 13, 14}));
  auto pos = [&](pid_t p) { return std::find(d.begin(), d.end(), p) - d.begin(); };
  EXPECT_LT(pos(11), pos(13));
  EXPECT_LT(pos(13), pos(14));
  EXPECT_TRUE(descendants_of(99, links).empty());
}

TEST(Descendants, ThisProcessesChildrenFromTheRealProc) {
  pid_t c = fork();
  if (c == 0) {
    pause();
    _exit(0);
  }
  auto d = descendants_of(getpid(), read_parent_links());
  kill(c, SIGKILL);
  waitpid(c, nullptr, 0);
  EXPECT_NE(std::find(d.begin(), d.end(), c), d.end());
}

}  // namespace
