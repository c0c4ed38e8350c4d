// SPDX-License-Identifier: Apache-2.0
//
// The unwind table store against the root it runs on (label kernel: the guests' root is an
// overlay whose mapped files their kernels name by the lower file, unlike stat()).
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <thread>

#include "unwind/row_store.hpp"

namespace {

// A command prebuilt by path (as loupe sees it) and then mapped by its process: on an
// overlayfs root (a container's, the kernel-matrix guests') the maps of 6.1 and 6.12 name
// the lower file's device and inode while stat() gives the overlay's, so the maps' key is
// not the prebuild's. It must reach the rows already built, not build a second copy (which
// filled the rows map in the guests and left libpython without rows). On a root whose maps
// and stat() agree the test holds trivially, and says so.
TEST(RowStore, ACommandPrebuiltByPathIsBuiltOnceWhenItsProcessMapsIt) {
  if (::geteuid() != 0) GTEST_SKIP() << "reads another process's maps: needs root";
  const std::string exe = "/bin/sleep";
  loupe::RowStore store;
  ASSERT_GE(store.prebuild(exe), 2u) << "sleep and at least its loader";
  const std::size_t rows = store.rows().size();
  const std::uint64_t files = store.stats().files;
  const pid_t pid = ::fork();
  if (pid == 0) {
    ::execl(exe.c_str(), "sleep", "5", static_cast<char*>(nullptr));
    ::_exit(127);
  }
  // Until the process runs the file: the exec done (until then the child is a fork of this
  // test, which maps libc too and a dozen files more) and its libraries mapped.
  const std::string real = std::filesystem::canonical(exe).string();
  const std::string proc_dir = "/proc/" + std::to_string(pid);
  std::string maps;
  for (int i = 0; i < 500; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
    std::error_code ec;
    if (std::filesystem::read_symlink(proc_dir + "/exe", ec).string() != real) continue;
    std::ifstream in(proc_dir + "/maps");
    maps.assign(std::istreambuf_iterator<char>(in), {});
    if (maps.find("libc") != std::string::npos) break;
  }
  // Which key the maps give the file: stat()'s, or the lower file's of an overlay.
  struct stat st {};
  ASSERT_EQ(::stat(exe.c_str(), &st), 0);
  char dev[48];
  std::snprintf(dev, sizeof(dev), "%02x:%02x %llu ", major(st.st_dev), minor(st.st_dev),
                (unsigned long long)st.st_ino);
  const bool other_key = maps.find(dev) == std::string::npos;
  loupe_unwind_proc proc{};
  const loupe::Status loaded = store.load_process(static_cast<std::uint32_t>(pid), &proc);
  ::kill(pid, SIGKILL);
  ::waitpid(pid, nullptr, 0);
  ASSERT_TRUE(loaded) << loaded.error();
  EXPECT_GE(proc.count, 2u);
  EXPECT_EQ(store.rows().size(), rows) << "a file built a second time under the maps' key";
  EXPECT_EQ(store.stats().files, files);
  std::printf("  %zu rows of %llu files, %u mappings with rows; the maps name %s\n", rows,
              (unsigned long long)files, proc.count,
              other_key ? "the files by another key than stat() (an overlay's lower files)"
                        : "the files as stat() does (the check holds trivially here)");
}

// A short command gone before its records were read (a shell loop's `cat`) is learnt by
// its path in loupe's namespace, when that path is the file its mapping named. On an
// overlay root stat() of the path cannot say so (the mapping names the lower file): its
// processes stayed unlearnt, and every later `cat` of the loop was walked by frame pointers
// alone (0 of 3,268 allocations reached main in the 6.1 guest under load). Holds
// trivially on a root whose maps and stat() agree.
TEST(RowStore, ACommandGoneBeforeItWasReadIsLearntByThePathItMapped) {
  if (::geteuid() != 0) GTEST_SKIP() << "reads another process's maps: needs root";
  const std::string exe = std::filesystem::canonical("/bin/sleep").string();
  const pid_t pid = ::fork();
  if (pid == 0) {
    ::execl(exe.c_str(), "sleep", "5", static_cast<char*>(nullptr));
    ::_exit(127);
  }
  // The key its mapping of the file has, read while it runs.
  unsigned major_no = 0, minor_no = 0;
  unsigned long long ino = 0;
  for (int i = 0; i < 500 && ino == 0; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
    std::ifstream in("/proc/" + std::to_string(pid) + "/maps");
    for (std::string line; std::getline(in, line);) {
      if (!line.ends_with(" " + exe)) continue;
      char perms[8];
      unsigned long long start, end, off;
      if (std::sscanf(line.c_str(), "%llx-%llx %7s %llx %x:%x %llu", &start, &end, perms, &off,
                      &major_no, &minor_no, &ino) == 7)
        break;
    }
  }
  ::kill(pid, SIGKILL);
  ::waitpid(pid, nullptr, 0);
  ASSERT_NE(ino, 0u) << "no mapping of " << exe;
  loupe::RowStore store;
  store.learn_file(static_cast<std::uint32_t>(pid), (std::uint64_t{major_no} << 32) | minor_no, ino,
                   exe);
  EXPECT_EQ(store.stats().files, 1u) << "a file its gone process mapped was not learnt";
  EXPECT_GT(store.rows().size(), 0u);
  struct stat st {};
  ASSERT_EQ(::stat(exe.c_str(), &st), 0);
  const bool other_key =
      st.st_ino != ino || major(st.st_dev) != major_no || minor(st.st_dev) != minor_no;
  std::printf("  the mapping names %s\n",
              other_key ? "the file by another key than stat() (an overlay's lower file)"
                        : "the file as stat() does (the check holds trivially here)");
}

}  // namespace
