// SPDX-License-Identifier: Apache-2.0
#include "bench_workload.hpp"

#include <arpa/inet.h>
#include <dlfcn.h>
#include <fcntl.h>
#include <linux/futex.h>
#include <malloc.h>
#include <netinet/in.h>
#include <pthread.h>
#include <sched.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/sysmacros.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <climits>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>

namespace loupe {
namespace {

std::uint64_t now_ns() {
  timespec ts{};
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<std::uint64_t>(ts.tv_sec) * 1000000000ull +
         static_cast<std::uint64_t>(ts.tv_nsec);
}

// futex2 calls are newer than Debian 12's headers.
#ifndef SYS_futex_waitv
#define SYS_futex_waitv 449
#endif
#ifndef SYS_futex_wait
#define SYS_futex_wait 455
#endif
constexpr unsigned kFutex2SizeU32 = 0x02, kFutex2Private = 128;

struct FutexWaitv {  // struct futex_waitv
  std::uint64_t val, uaddr;
  std::uint32_t flags, reserved;
};

enum SyscallLoopId {
  kGetppid,
  kGetpid,
  kGettid,
  kGetuid,
  kRead,
  kWrite,
  kGetcwd,
  kClose,
  kSchedYield,
  kFutex,
  kFutexWait,
  kFutexWaitv,
  kMprotect,
  kPkeyMprotect,
  kMmapMunmap,
};

struct SyscallLoop {
  SyscallLoopId id;
  const char* name;
  std::vector<std::string> syscalls;  // each made once per iteration
};

const std::vector<SyscallLoop>& syscall_loops() {
  static const std::vector<SyscallLoop> t = {
      {kGetppid, "getppid", {"getppid"}},
      {kGetpid, "getpid", {"getpid"}},
      {kGettid, "gettid", {"gettid"}},
      {kGetuid, "getuid", {"getuid"}},
      {kRead, "read", {"read"}},
      {kWrite, "write", {"write"}},
      {kGetcwd, "getcwd", {"getcwd"}},
      {kClose, "close", {"close"}},
      {kSchedYield, "sched_yield", {"sched_yield"}},
      // Waits on a word that does not hold the expected value: EAGAIN at once, so each
      // call is a whole wait operation for a lock profiler without sleeping.
      {kFutex, "futex", {"futex"}},
      {kFutexWait, "futex_wait", {"futex_wait"}},
      {kFutexWaitv, "futex_waitv", {"futex_waitv"}},
      // Flipping one page between read-only and read-write.
      {kMprotect, "mprotect", {"mprotect"}},
      {kPkeyMprotect, "pkey_mprotect", {"pkey_mprotect"}},
      {kMmapMunmap, "mmap+munmap", {"mmap", "munmap"}},
  };
  return t;
}

}  // namespace

std::unique_ptr<SyscallWorkload> SyscallWorkload::find(const std::string& syscall) {
  for (const auto& l : syscall_loops())
    if (std::find(l.syscalls.begin(), l.syscalls.end(), syscall) != l.syscalls.end())
      return std::unique_ptr<SyscallWorkload>(new SyscallWorkload(l.name, l.id, l.syscalls));
  return nullptr;
}

std::vector<std::string> SyscallWorkload::names() {
  std::vector<std::string> out;
  for (const auto& l : syscall_loops()) out.insert(out.end(), l.syscalls.begin(), l.syscalls.end());
  return out;
}

std::uint64_t SyscallWorkload::run(std::uint64_t n) const {
  char buf[PATH_MAX];
  int fd = -1;
  if (loop_ == kRead) fd = open("/dev/zero", O_RDONLY | O_CLOEXEC);
  if (loop_ == kWrite) fd = open("/dev/null", O_WRONLY | O_CLOEXEC);
  int futex_word = 0;
  FutexWaitv waitv{1, reinterpret_cast<std::uintptr_t>(&futex_word),
                   kFutex2SizeU32 | kFutex2Private, 0};
  const long page = sysconf(_SC_PAGESIZE);
  void* region = nullptr;
  if (loop_ == kMprotect || loop_ == kPkeyMprotect)
    region = mmap(nullptr, static_cast<std::size_t>(page), PROT_READ | PROT_WRITE,
                  MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  const std::uint64_t start = now_ns();
  for (std::uint64_t i = 0; i < n; ++i) {
    const int prot = (i & 1) ? PROT_READ : PROT_READ | PROT_WRITE;
    switch (loop_) {
      case kGetppid: syscall(SYS_getppid); break;
      case kGetpid: syscall(SYS_getpid); break;
      case kGettid: syscall(SYS_gettid); break;
      case kGetuid: syscall(SYS_getuid); break;
      case kRead: syscall(SYS_read, fd, buf, 1); break;
      case kWrite: syscall(SYS_write, fd, buf, 1); break;
      case kGetcwd: syscall(SYS_getcwd, buf, sizeof(buf)); break;
      case kClose: syscall(SYS_close, -1); break;  // EBADF: enters and leaves, closes nothing
      case kSchedYield: syscall(SYS_sched_yield); break;
      case kFutex:
        syscall(SYS_futex, &futex_word, FUTEX_WAIT_PRIVATE, 1, nullptr, nullptr, 0);
        break;
      case kFutexWait:
        syscall(SYS_futex_wait, &futex_word, 1ul, ~0ul, kFutex2SizeU32 | kFutex2Private, nullptr,
                CLOCK_MONOTONIC);
        break;
      case kFutexWaitv: syscall(SYS_futex_waitv, &waitv, 1u, 0u, nullptr, CLOCK_MONOTONIC); break;
      case kMprotect: syscall(SYS_mprotect, region, page, prot); break;
      case kPkeyMprotect: syscall(SYS_pkey_mprotect, region, page, prot, -1); break;
      case kMmapMunmap: {
        void* p = mmap(nullptr, static_cast<std::size_t>(page), PROT_READ,
                       MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        if (p != MAP_FAILED) munmap(p, static_cast<std::size_t>(page));
        break;
      }
    }
  }
  const std::uint64_t elapsed = now_ns() - start;
  if (fd >= 0) close(fd);
  if (region && region != MAP_FAILED) munmap(region, static_cast<std::size_t>(page));
  return elapsed;
}

// ---------------------------------------------------------------------------------------------

namespace {
constexpr std::size_t kBlock = 4096;
constexpr std::size_t kFileBlocks = 4096;  // 16 MiB: reads hop around it
}  // namespace

std::unique_ptr<BlockReadWorkload> BlockReadWorkload::create(std::string* why) {
  std::vector<std::string> dirs;
  if (const char* d = std::getenv("LOUPE_BENCH_DIR"); d && *d) dirs.emplace_back(d);
  dirs.insert(dirs.end(), {"/var/tmp", "/tmp"});
  std::string tried;
  auto refuse = [&](const std::string& dir, const char* because) {
    tried += (tried.empty() ? "" : ", ") + dir + " (" + because + ")";
  };
  for (const auto& dir : dirs) {
    struct stat st {};
    // Filesystems without a block device (tmpfs, overlay, proc) have device major 0.
    if (stat(dir.c_str(), &st) != 0 || major(st.st_dev) == 0) {
      refuse(dir, "not on a block device");
      continue;
    }
    std::string path = dir + "/loupe-bench-" + std::to_string(getpid()) + ".dat";
    int wfd = open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    if (wfd < 0) {
      refuse(dir, "not writable");
      continue;
    }
    std::vector<char> chunk(1 << 20, 'b');
    bool ok = true;
    for (std::size_t i = 0; ok && i < kFileBlocks * kBlock / chunk.size(); ++i)
      ok = write(wfd, chunk.data(), chunk.size()) == static_cast<ssize_t>(chunk.size());
    ok = ok && fsync(wfd) == 0;
    close(wfd);
    int fd = ok ? open(path.c_str(), O_RDONLY | O_DIRECT | O_CLOEXEC) : -1;
    void* buf = nullptr;
    if (fd < 0 || posix_memalign(&buf, kBlock, kBlock) != 0) {
      if (fd >= 0) close(fd);
      unlink(path.c_str());
      refuse(dir, "no O_DIRECT or no space for 16 MiB");
      continue;
    }
    return std::unique_ptr<BlockReadWorkload>(new BlockReadWorkload(path, fd, buf));
  }
  *why = "no directory on a block device for O_DIRECT reads: tried " + tried +
         " (set LOUPE_BENCH_DIR)";
  return nullptr;
}

BlockReadWorkload::BlockReadWorkload(std::string path, int fd, void* buf)
    : path_(std::move(path)), fd_(fd), buf_(buf) {}

BlockReadWorkload::~BlockReadWorkload() {
  close(fd_);
  free(buf_);
  unlink(path_.c_str());
}

std::uint64_t BlockReadWorkload::run(std::uint64_t n) const {
  const std::uint64_t start = now_ns();
  for (std::uint64_t i = 0; i < n; ++i) {
    // Striding by a prime so no two reads are adjacent (no merging, no readahead).
    auto off = static_cast<off_t>((i * 97) % kFileBlocks * kBlock);
    if (pread(fd_, buf_, kBlock, off) != static_cast<ssize_t>(kBlock)) break;
  }
  return now_ns() - start;
}

// ---------------------------------------------------------------------------------------------

namespace {

// The partner: echoes every byte back until it reads 'q'.
void* echo_partner(void* arg) {
  const int* fds = static_cast<const int*>(arg);  // {read end, write end}
  char c = 0;
  while (read(fds[0], &c, 1) == 1 && c != 'q')
    if (write(fds[1], &c, 1) != 1) break;
  return nullptr;
}

bool pin_to(pthread_t t, int cpu) {
  cpu_set_t set;
  CPU_ZERO(&set);
  CPU_SET(cpu, &set);
  return pthread_setaffinity_np(t, sizeof(set), &set) == 0;
}

}  // namespace

std::unique_ptr<ContextSwitchWorkload> ContextSwitchWorkload::create(std::string* why) {
  std::unique_ptr<ContextSwitchWorkload> w(new ContextSwitchWorkload());
  if (pipe2(w->to_partner_, O_CLOEXEC) != 0 || pipe2(w->from_partner_, O_CLOEXEC) != 0) {
    *why = std::string("pipe2: ") + std::strerror(errno);
    return nullptr;
  }
  const int cpu = sched_getcpu();
  w->cpu_ = cpu < 0 ? 0 : cpu;
  // The partner reads to_partner_ and writes from_partner_ (the array lives in the
  // workload, which joins the thread before it goes).
  w->partner_fds_[0] = w->to_partner_[0];
  w->partner_fds_[1] = w->from_partner_[1];
  pthread_t t;
  if (pthread_create(&t, nullptr, echo_partner, w->partner_fds_) != 0) {
    *why = "cannot start the partner thread";
    return nullptr;
  }
  pin_to(t, w->cpu_);
  w->partner_ = static_cast<unsigned long>(t);
  return w;
}

ContextSwitchWorkload::~ContextSwitchWorkload() {
  if (partner_) {
    const char q = 'q';
    if (write(to_partner_[1], &q, 1) == 1) pthread_join(static_cast<pthread_t>(partner_), nullptr);
  }
  for (int fd : {to_partner_[0], to_partner_[1], from_partner_[0], from_partner_[1]})
    if (fd >= 0) close(fd);
}

std::uint64_t ContextSwitchWorkload::run(std::uint64_t n) const {
  // On the partner's CPU, so every iteration switches twice there (on two CPUs a
  // thread may spin in idle and the count per iteration would vary); restored after.
  cpu_set_t before;
  const bool had = pthread_getaffinity_np(pthread_self(), sizeof(before), &before) == 0;
  pin_to(pthread_self(), cpu_);
  char c = 'x';
  const std::uint64_t start = now_ns();
  for (std::uint64_t i = 0; i < n; ++i)
    if (write(to_partner_[1], &c, 1) != 1 || read(from_partner_[0], &c, 1) != 1) break;
  const std::uint64_t elapsed = now_ns() - start;
  if (had) pthread_setaffinity_np(pthread_self(), sizeof(before), &before);
  return elapsed;
}

std::unique_ptr<CachedReadWorkload> CachedReadWorkload::create(std::string* why) {
  std::vector<std::string> dirs;
  if (const char* d = std::getenv("LOUPE_BENCH_DIR"); d && *d) dirs.emplace_back(d);
  dirs.insert(dirs.end(), {"/var/tmp", "/tmp"});
  for (const auto& dir : dirs) {
    std::string path = dir + "/loupe-bench-cached-" + std::to_string(getpid()) + ".dat";
    int fd = open(path.c_str(), O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    if (fd < 0) continue;
    std::vector<char> chunk(16 * kBlock, 'c');
    char probe[kBlock];
    // Written, then read once: every later read finds its pages cached.
    if (write(fd, chunk.data(), chunk.size()) == static_cast<ssize_t>(chunk.size()) &&
        pread(fd, chunk.data(), chunk.size(), 0) == static_cast<ssize_t>(chunk.size()) &&
        pread(fd, probe, sizeof(probe), 0) == static_cast<ssize_t>(sizeof(probe)))
      return std::unique_ptr<CachedReadWorkload>(new CachedReadWorkload(path, fd));
    close(fd);
    unlink(path.c_str());
  }
  *why = "no writable directory for a 64 KiB scratch file ($LOUPE_BENCH_DIR, /var/tmp, /tmp)";
  return nullptr;
}

CachedReadWorkload::~CachedReadWorkload() {
  close(fd_);
  unlink(path_.c_str());
}

std::uint64_t CachedReadWorkload::run(std::uint64_t n) const {
  char buf[kBlock];
  const std::uint64_t start = now_ns();
  for (std::uint64_t i = 0; i < n; ++i)
    if (pread(fd_, buf, kBlock, static_cast<off_t>((i % 16) * kBlock)) !=
        static_cast<ssize_t>(kBlock))
      break;
  return now_ns() - start;
}

// ---------------------------------------------------------------------------------------------

std::unique_ptr<LoopbackConnectWorkload> LoopbackConnectWorkload::create(std::string* why) {
  int l = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof(a);
  if (l < 0 || bind(l, reinterpret_cast<sockaddr*>(&a), sizeof(a)) != 0 || listen(l, 64) != 0 ||
      getsockname(l, reinterpret_cast<sockaddr*>(&a), &len) != 0) {
    *why = std::string("a TCP listener on 127.0.0.1: ") + std::strerror(errno);
    if (l >= 0) close(l);
    return nullptr;
  }
  return std::unique_ptr<LoopbackConnectWorkload>(
      new LoopbackConnectWorkload(l, ntohs(a.sin_port)));
}

LoopbackConnectWorkload::~LoopbackConnectWorkload() {
  close(listener_);
}

std::uint64_t LoopbackConnectWorkload::run(std::uint64_t n) const {
  sockaddr_in server{};
  server.sin_family = AF_INET;
  server.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  server.sin_port = htons(static_cast<std::uint16_t>(port_));
  char c = 'x';
  const std::uint64_t start = now_ns();
  for (std::uint64_t i = 0; i < n; ++i) {
    // 127.1.0.1 .. 127.254.255.254: a fresh source address per connection.
    const std::uint32_t k = next_++ % (254u * 65536u - 2u) + 1u;
    sockaddr_in from{};
    from.sin_family = AF_INET;
    from.sin_addr.s_addr = htonl((127u << 24) | ((k >> 16) + 1u) << 16 | (k & 0xffffu));
    int cl = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    bool ok = cl >= 0 && bind(cl, reinterpret_cast<sockaddr*>(&from), sizeof(from)) == 0 &&
              connect(cl, reinterpret_cast<sockaddr*>(&server), sizeof(server)) == 0;
    int sv = ok ? accept4(listener_, nullptr, nullptr, SOCK_CLOEXEC) : -1;
    ok = ok && sv >= 0 && send(cl, &c, 1, 0) == 1 && recv(sv, &c, 1, 0) == 1 &&
         send(sv, &c, 1, 0) == 1 && recv(cl, &c, 1, 0) == 1;
    if (cl >= 0) close(cl);
    if (sv >= 0) close(sv);
    if (!ok) break;
  }
  return now_ns() - start;
}

// ---------------------------------------------------------------------------------------------

std::uint64_t BenchLoop::calibrate(std::uint64_t target_ns) const {
  std::uint64_t n = 16;
  for (;;) {
    std::uint64_t t = run(n);
    if (t >= target_ns / 4 || n >= (1ull << 30)) {
      double per = static_cast<double>(std::max<std::uint64_t>(t, 1)) / static_cast<double>(n);
      return std::max<std::uint64_t>(
          16, static_cast<std::uint64_t>(static_cast<double>(target_ns) / per));
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

// libc's own definition of `name`, not the process's: the loupe binary links jemalloc,
// whose malloc/free interpose for the whole process, while the probes sit on libc's.
void* libc_sym(const char* name) {
  static void* libc = dlopen("libc.so.6", RTLD_NOW | RTLD_NOLOAD);
  void* sym = libc ? dlsym(libc, name) : nullptr;
  return sym ? sym : dlsym(RTLD_DEFAULT, name);
}

// libc's `name` (typed like `fn`), through a volatile pointer.
template <typename F>
F* libc_fn(F* /*fn*/, const char* name) {
  return opaque(reinterpret_cast<F*>(libc_sym(name)));
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
      {kMutexLockUnlock,
       "pthread_mutex_lock+unlock",
       {"pthread_mutex_lock", "pthread_mutex_unlock"}},
      {kMutexTrylockUnlock,
       "pthread_mutex_trylock+unlock",
       {"pthread_mutex_trylock", "pthread_mutex_unlock"}},
      {kRwlockRdlockUnlock,
       "pthread_rwlock_rdlock+unlock",
       {"pthread_rwlock_rdlock", "pthread_rwlock_unlock"}},
      {kRwlockWrlockUnlock,
       "pthread_rwlock_wrlock+unlock",
       {"pthread_rwlock_wrlock", "pthread_rwlock_unlock"}},
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
    void* sym = libc_sym(fn.c_str());
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
  auto p_malloc = libc_fn(&malloc, "malloc");
  auto p_free = libc_fn(&free, "free");
  auto p_calloc = libc_fn(&calloc, "calloc");
  auto p_realloc = libc_fn(&realloc, "realloc");
  auto p_posix_memalign = libc_fn(&posix_memalign, "posix_memalign");
  auto p_aligned_alloc = libc_fn(&aligned_alloc, "aligned_alloc");
  auto p_memalign = libc_fn(&memalign, "memalign");
  auto p_valloc = libc_fn(&valloc, "valloc");
  auto p_lock = libc_fn(&pthread_mutex_lock, "pthread_mutex_lock");
  auto p_trylock = libc_fn(&pthread_mutex_trylock, "pthread_mutex_trylock");
  auto p_unlock = libc_fn(&pthread_mutex_unlock, "pthread_mutex_unlock");
  auto p_rdlock = libc_fn(&pthread_rwlock_rdlock, "pthread_rwlock_rdlock");
  auto p_wrlock = libc_fn(&pthread_rwlock_wrlock, "pthread_rwlock_wrlock");
  auto p_rwunlock = libc_fn(&pthread_rwlock_unlock, "pthread_rwlock_unlock");
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
      case kPosixMemalignFree:
        if (p_posix_memalign(&p, 64, 64) == 0) p_free(p);
        break;
      case kAlignedAllocFree: p_free(p_aligned_alloc(64, 64)); break;
      case kMemalignFree: p_free(p_memalign(64, 64)); break;
      case kVallocFree: p_free(p_valloc(64)); break;
      case kMutexLockUnlock:
        p_lock(&mu);
        p_unlock(&mu);
        break;
      case kMutexTrylockUnlock:
        if (p_trylock(&mu) == 0) p_unlock(&mu);
        break;
      case kRwlockRdlockUnlock:
        p_rdlock(&rw);
        p_rwunlock(&rw);
        break;
      case kRwlockWrlockUnlock:
        p_wrlock(&rw);
        p_rwunlock(&rw);
        break;
    }
  }
  const std::uint64_t elapsed = now_ns() - start;
  free(held);
  return elapsed;
}

std::optional<std::uintptr_t> self_address_of(const std::string& path, std::uint64_t file_offset) {
  struct stat want {};
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
    if (std::sscanf(line.c_str(), "%llx-%llx %7s %llx %x:%x %llu %n", &start, &end, perms, &off,
                    &dev_major, &dev_minor, &inode, &name_at) < 7)
      continue;
    // Overlay filesystems report the lower file's device in maps: the path decides then.
    bool same_file = (inode == want.st_ino && makedev(dev_major, dev_minor) == want.st_dev) ||
                     (name_at > 0 && line.compare(static_cast<std::size_t>(name_at),
                                                  std::string::npos, real_path) == 0);
    if (perms[2] != 'x' || !same_file) continue;
    if (file_offset >= off && file_offset < off + (end - start))
      return static_cast<std::uintptr_t>(start + (file_offset - off));
  }
  return std::nullopt;
}

}  // namespace loupe
