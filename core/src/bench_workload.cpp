// SPDX-License-Identifier: Apache-2.0
#include "bench_workload.hpp"

#include <fcntl.h>
#include <linux/futex.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <climits>

namespace loupe {
namespace {

std::uint64_t now_ns() {
  timespec ts{};
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<std::uint64_t>(ts.tv_sec) * 1000000000ull + static_cast<std::uint64_t>(ts.tv_nsec);
}

const std::vector<std::string>& table() {
  static const std::vector<std::string> t = {"getppid", "getpid", "gettid", "getuid",      "read",
                                             "write",   "getcwd", "close",  "sched_yield", "futex"};
  return t;
}

}  // namespace

std::optional<SyscallWorkload> SyscallWorkload::find(const std::string& syscall) {
  if (std::find(table().begin(), table().end(), syscall) == table().end()) return std::nullopt;
  return SyscallWorkload(syscall);
}

std::vector<std::string> SyscallWorkload::names() { return table(); }

std::uint64_t SyscallWorkload::run(std::uint64_t n) const {
  char buf[PATH_MAX];
  int fd = -1;
  if (name_ == "read") fd = open("/dev/zero", O_RDONLY | O_CLOEXEC);
  if (name_ == "write") fd = open("/dev/null", O_WRONLY | O_CLOEXEC);
  int futex_word = 0;
  const std::uint64_t start = now_ns();
  for (std::uint64_t i = 0; i < n; ++i) {
    if (name_ == "getppid") syscall(SYS_getppid);
    else if (name_ == "getpid") syscall(SYS_getpid);
    else if (name_ == "gettid") syscall(SYS_gettid);
    else if (name_ == "getuid") syscall(SYS_getuid);
    else if (name_ == "read") syscall(SYS_read, fd, buf, 1);
    else if (name_ == "write") syscall(SYS_write, fd, buf, 1);
    else if (name_ == "getcwd") syscall(SYS_getcwd, buf, sizeof(buf));
    else if (name_ == "close") syscall(SYS_close, -1);  // EBADF: enters and leaves, closes nothing
    else if (name_ == "sched_yield") syscall(SYS_sched_yield);
    else if (name_ == "futex") syscall(SYS_futex, &futex_word, FUTEX_WAKE_PRIVATE, 1, nullptr, nullptr, 0);
  }
  const std::uint64_t elapsed = now_ns() - start;
  if (fd >= 0) close(fd);
  return elapsed;
}

std::uint64_t SyscallWorkload::calibrate(std::uint64_t target_ns) const {
  std::uint64_t n = 1000;
  for (;;) {
    std::uint64_t t = run(n);
    if (t >= target_ns / 4 || n >= (1ull << 30)) {
      double per = static_cast<double>(std::max<std::uint64_t>(t, 1)) / static_cast<double>(n);
      return std::max<std::uint64_t>(1000, static_cast<std::uint64_t>(static_cast<double>(target_ns) / per));
    }
    n *= 4;
  }
}

}  // namespace loupe
