// SPDX-License-Identifier: Apache-2.0
#include "bench_workload.hpp"

#include <dlfcn.h>
#include <fcntl.h>
#include <linux/futex.h>
#include <malloc.h>
#include <pthread.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <climits>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <sstream>

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

std::unique_ptr<SyscallWorkload> SyscallWorkload::find(const std::string& syscall) {
  if (std::find(table().begin(), table().end(), syscall) == table().end()) return nullptr;
  return std::unique_ptr<SyscallWorkload>(new SyscallWorkload(syscall));
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

std::uint64_t BenchLoop::calibrate(std::uint64_t target_ns) const {
  std::uint64_t n = 16;
  for (;;) {
    std::uint64_t t = run(n);
    if (t >= target_ns / 4 || n >= (1ull << 30)) {
      double per = static_cast<double>(std::max<std::uint64_t>(t, 1)) / static_cast<double>(n);
      return std::max<std::uint64_t>(16, static_cast<std::uint64_t>(static_cast<double>(target_ns) / per));
    }
    n *= 4;
  }
}

// ---------------------------------------------------------------------------------------------
// User-call loops. The functions are called through volatile pointers: the compiler may not
// fold a malloc/free pair away or inline a lock, and the call lands on the exported entry
// the uprobe sits on.

namespace {

template <typename F>
F opaque(F f) {
  F volatile p = f;
  return p;
}

enum UserLoopId {
  kMallocFree,
  kCallocFree,
  kRealloc,
  kPosixMemalignFree,
  kAlignedAllocFree,
  kMemalignFree,
  kVallocFree,
  kMutexLockUnlock,
  kMutexTrylockUnlock,
  kRwlockRdlockUnlock,
  kRwlockWrlockUnlock,
};

struct UserLoop {
  UserLoopId id;
  const char* name;
  std::vector<const char*> calls;  // every function one iteration calls once
};

const std::vector<UserLoop>& user_loops() {
  static const std::vector<UserLoop> loops = {
      {kMallocFree, "malloc+free", {"malloc", "free"}},
      {kCallocFree, "calloc+free", {"calloc", "free"}},
      // Shrinking and regrowing within one chunk: realloc returns in place, calling neither
      // malloc nor free.
      {kRealloc, "realloc", {"realloc"}},
      {kPosixMemalignFree, "posix_memalign+free", {"posix_memalign", "free"}},
      {kAlignedAllocFree, "aligned_alloc+free", {"aligned_alloc", "free"}},
      {kMemalignFree, "memalign+free", {"memalign", "free"}},
      {kVallocFree, "valloc+free", {"valloc", "free"}},
      {kMutexLockUnlock, "pthread_mutex_lock+unlock", {"pthread_mutex_lock", "pthread_mutex_unlock"}},
      {kMutexTrylockUnlock, "pthread_mutex_trylock+unlock", {"pthread_mutex_trylock", "pthread_mutex_unlock"}},
      {kRwlockRdlockUnlock, "pthread_rwlock_rdlock+unlock", {"pthread_rwlock_rdlock", "pthread_rwlock_unlock"}},
      {kRwlockWrlockUnlock, "pthread_rwlock_wrlock+unlock", {"pthread_rwlock_wrlock", "pthread_rwlock_unlock"}},
  };
  return loops;
}

// The first loop that calls `fn`: allocation functions are paired with free, lock functions
// with their unlock, so a probe on free or unlock is driven by the plain malloc / lock loop.
const UserLoop* loop_calling(const std::string& fn) {
  for (const auto& l : user_loops())
    for (const char* c : l.calls)
      if (fn == c) return &l;
  return nullptr;
}

}  // namespace

std::optional<std::string> UserCallWorkload::function_at(std::uintptr_t addr) {
  for (const auto& fn : functions()) {
    void* sym = dlsym(RTLD_DEFAULT, fn.c_str());
    if (sym && reinterpret_cast<std::uintptr_t>(sym) == addr) return fn;
  }
  return std::nullopt;
}

std::unique_ptr<UserCallWorkload> UserCallWorkload::calling(const std::string& function) {
  const UserLoop* loop = loop_calling(function);
  if (!loop) return nullptr;
  return std::unique_ptr<UserCallWorkload>(
      new UserCallWorkload(loop->name, loop->id, {loop->calls.begin(), loop->calls.end()}));
}

std::vector<std::string> UserCallWorkload::functions() {
  std::vector<std::string> out;
  for (const auto& l : user_loops())
    for (const char* c : l.calls)
      if (std::find(out.begin(), out.end(), c) == out.end()) out.emplace_back(c);
  return out;
}

std::uint64_t UserCallWorkload::run(std::uint64_t n) const {
  auto p_malloc = opaque(&malloc);
  auto p_free = opaque(&free);
  auto p_calloc = opaque(&calloc);
  auto p_realloc = opaque(&realloc);
  auto p_posix_memalign = opaque(&posix_memalign);
  auto p_aligned_alloc = opaque(&aligned_alloc);
  auto p_memalign = opaque(&memalign);
  auto p_valloc = opaque(&valloc);
  auto p_lock = opaque(&pthread_mutex_lock);
  auto p_trylock = opaque(&pthread_mutex_trylock);
  auto p_unlock = opaque(&pthread_mutex_unlock);
  auto p_rdlock = opaque(&pthread_rwlock_rdlock);
  auto p_wrlock = opaque(&pthread_rwlock_wrlock);
  auto p_rwunlock = opaque(&pthread_rwlock_unlock);
  pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
  pthread_rwlock_t rw = PTHREAD_RWLOCK_INITIALIZER;
  void* held = loop_ == kRealloc ? p_malloc(64) : nullptr;
  const std::uint64_t start = now_ns();
  for (std::uint64_t i = 0; i < n; ++i) {
    void* p = nullptr;
    switch (loop_) {
      case kMallocFree: p_free(p_malloc(64)); break;
      case kCallocFree: p_free(p_calloc(1, 64)); break;
      case kRealloc: held = p_realloc(held, (i & 1) ? 56 : 64); break;
      case kPosixMemalignFree: if (p_posix_memalign(&p, 64, 64) == 0) p_free(p); break;
      case kAlignedAllocFree: p_free(p_aligned_alloc(64, 64)); break;
      case kMemalignFree: p_free(p_memalign(64, 64)); break;
      case kVallocFree: p_free(p_valloc(64)); break;
      case kMutexLockUnlock: p_lock(&mu); p_unlock(&mu); break;
      case kMutexTrylockUnlock: if (p_trylock(&mu) == 0) p_unlock(&mu); break;
      case kRwlockRdlockUnlock: p_rdlock(&rw); p_rwunlock(&rw); break;
      case kRwlockWrlockUnlock: p_wrlock(&rw); p_rwunlock(&rw); break;
    }
  }
  const std::uint64_t elapsed = now_ns() - start;
  free(held);
  return elapsed;
}

std::optional<std::uintptr_t> self_address_of(const std::string& path, std::uint64_t file_offset) {
  struct stat want{};
  if (stat(path.c_str(), &want) != 0) return std::nullopt;
  char* real = realpath(path.c_str(), nullptr);
  const std::string real_path = real ? real : path;
  free(real);
  std::ifstream maps("/proc/self/maps");
  for (std::string line; std::getline(maps, line);) {
    // start-end perms offset dev inode path
    unsigned long long start = 0, end = 0, off = 0, inode = 0;
    char perms[8] = {};
    unsigned dev_major = 0, dev_minor = 0;
    int name_at = 0;
    if (std::sscanf(line.c_str(), "%llx-%llx %7s %llx %x:%x %llu %n", &start, &end, perms, &off, &dev_major,
                    &dev_minor, &inode, &name_at) < 7)
      continue;
    // Overlay filesystems report the lower file's device in maps: the path decides then.
    bool same_file = (inode == want.st_ino && makedev(dev_major, dev_minor) == want.st_dev) ||
                     (name_at > 0 && line.compare(static_cast<std::size_t>(name_at), std::string::npos, real_path) == 0);
    if (perms[2] != 'x' || !same_file) continue;
    if (file_offset >= off && file_offset < off + (end - start))
      return static_cast<std::uintptr_t>(start + (file_offset - off));
  }
  return std::nullopt;
}

}  // namespace loupe
