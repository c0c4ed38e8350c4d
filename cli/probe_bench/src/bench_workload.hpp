// SPDX-License-Identifier: Apache-2.0
//
// Calibrated workloads for `loupe bench`, run in loupe's own process:
//   - syscall loops, made through syscall(2) so no libc cache hides a call: each iteration
//     enters and leaves the kernel once, firing that syscall's sys_enter/sys_exit
//     tracepoints (and raw_syscalls') once;
//   - block I/O: O_DIRECT reads of a scratch file on a block device;
//   - context switches: two threads ping-ponging a byte through pipes on one CPU;
//   - user-call loops over the libc functions profilers put uprobes on (allocation and
//     pthread lock entry points): each iteration calls each function of the loop once, so
//     a uprobe or uretprobe on any of them fires once per iteration. A uprobe target is
//     matched by address: the probed file offset, mapped into this process, must be the
//     entry of the very function the loop calls.
#ifndef LOUPE_CLI_PROBE_BENCH_SRC_BENCH_WORKLOAD_HPP
#define LOUPE_CLI_PROBE_BENCH_SRC_BENCH_WORKLOAD_HPP

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace loupe {

class BenchLoop {
 public:
  virtual ~BenchLoop() = default;
  // "getppid", "malloc+free", ...
  virtual const std::string& name() const = 0;
  // "syscall", "user call", "block I/O" or "scheduler"
  virtual const char* kind() const = 0;
  // What one iteration does once each: syscalls, functions, or block tracepoint events.
  virtual const std::vector<std::string>& members() const = 0;
  // Runs `iterations` iterations; returns the elapsed ns (CLOCK_MONOTONIC).
  virtual std::uint64_t run(std::uint64_t iterations) const = 0;
  // Iterations that take about `target_ns` on this machine now (with whatever is attached).
  std::uint64_t calibrate(std::uint64_t target_ns) const;
};

class SyscallWorkload : public BenchLoop {
 public:
  // The built-in loop that makes `syscall` (getppid, getpid, gettid, getuid, read, write,
  // getcwd, close, sched_yield, futex, futex_wait, futex_waitv, mprotect, pkey_mprotect,
  // mmap and munmap as one mmap+munmap loop), or nullptr.
  static std::unique_ptr<SyscallWorkload> find(const std::string& syscall);
  static std::vector<std::string> names();

  const std::string& name() const override { return name_; }
  const char* kind() const override { return "syscall"; }
  const std::vector<std::string>& members() const override { return syscalls_; }
  std::uint64_t run(std::uint64_t iterations) const override;

 private:
  SyscallWorkload(std::string name, int loop, std::vector<std::string> syscalls)
      : name_(std::move(name)), loop_(loop), syscalls_(std::move(syscalls)) {}
  std::string name_;
  int loop_;
  std::vector<std::string> syscalls_;
};

// Synchronous O_DIRECT 4 KiB reads of a 16 MiB scratch file on a block device: each
// iteration is one request through block_rq_insert (when the device has a scheduler queue),
// block_rq_issue and block_rq_complete.
class BlockReadWorkload : public BenchLoop {
 public:
  // Creates the file in the first of $LOUPE_BENCH_DIR, /var/tmp, /tmp that is on a block
  // device and takes O_DIRECT; nullptr with *why when none is.
  static std::unique_ptr<BlockReadWorkload> create(std::string* why);
  ~BlockReadWorkload() override;
  BlockReadWorkload(const BlockReadWorkload&) = delete;
  BlockReadWorkload& operator=(const BlockReadWorkload&) = delete;

  const std::string& name() const override { return name_; }
  const char* kind() const override { return "block I/O"; }
  const std::vector<std::string>& members() const override { return events_; }
  std::uint64_t run(std::uint64_t iterations) const override;

 private:
  BlockReadWorkload(std::string path, int fd, void* buf);
  std::string name_ = "O_DIRECT 4 KiB read";
  std::vector<std::string> events_ = {"block_rq_insert", "block_rq_issue", "block_rq_complete"};
  std::string path_;
  int fd_;
  void* buf_;
};

// Two threads on one CPU passing a byte back and forth through two pipes: each iteration
// is two context switches (each thread blocks in read() and is woken by the other's
// write()), firing sched_switch twice and sched_waking twice. The partner thread lives as
// long as the workload.
class ContextSwitchWorkload : public BenchLoop {
 public:
  // nullptr with *why when the pipes or the thread cannot be made.
  static std::unique_ptr<ContextSwitchWorkload> create(std::string* why);
  ~ContextSwitchWorkload() override;
  ContextSwitchWorkload(const ContextSwitchWorkload&) = delete;
  ContextSwitchWorkload& operator=(const ContextSwitchWorkload&) = delete;

  const std::string& name() const override { return name_; }
  const char* kind() const override { return "scheduler"; }
  const std::vector<std::string>& members() const override { return events_; }
  std::uint64_t run(std::uint64_t iterations) const override;

 private:
  ContextSwitchWorkload() = default;
  std::string name_ = "pipe ping-pong (2 threads, 1 CPU)";
  std::vector<std::string> events_ = {"sched_switch", "sched_waking"};
  int to_partner_[2] = {-1, -1};
  int from_partner_[2] = {-1, -1};
  int partner_fds_[2] = {-1, -1};  // what the partner reads from and writes to
  int cpu_ = 0;
  unsigned long partner_ = 0;  // pthread_t
};

// 4 KiB preads of a 64 KiB scratch file in the page cache: each iteration is one file
// syscall that finds its data in memory (a profiler's cost per cached file read).
class CachedReadWorkload : public BenchLoop {
 public:
  // nullptr with *why when no scratch file can be made in $LOUPE_BENCH_DIR, /var/tmp, /tmp.
  static std::unique_ptr<CachedReadWorkload> create(std::string* why);
  ~CachedReadWorkload() override;
  CachedReadWorkload(const CachedReadWorkload&) = delete;
  CachedReadWorkload& operator=(const CachedReadWorkload&) = delete;

  const std::string& name() const override { return name_; }
  const char* kind() const override { return "syscall"; }
  const std::vector<std::string>& members() const override { return syscalls_; }
  std::uint64_t run(std::uint64_t iterations) const override;

 private:
  CachedReadWorkload(std::string path, int fd) : path_(std::move(path)), fd_(fd) {}
  std::string name_ = "4 KiB pread of a cached file";
  std::vector<std::string> syscalls_ = {"pread64"};
  std::string path_;
  int fd_;
};

// One loopback TCP connection per iteration, both ends in this process: connect to a
// listener on 127.0.0.1, accept, one byte each way, the client closes, then the server
// (an orderly close: SYN_SENT ... TIME_WAIT, about 10 state changes). Each connection
// comes from its own 127.x.y.z so TIME_WAIT never runs out of ports.
class LoopbackConnectWorkload : public BenchLoop {
 public:
  // nullptr with *why when the listener cannot be made.
  static std::unique_ptr<LoopbackConnectWorkload> create(std::string* why);
  ~LoopbackConnectWorkload() override;
  LoopbackConnectWorkload(const LoopbackConnectWorkload&) = delete;
  LoopbackConnectWorkload& operator=(const LoopbackConnectWorkload&) = delete;

  const std::string& name() const override { return name_; }
  const char* kind() const override { return "tcp"; }
  const std::vector<std::string>& members() const override { return events_; }
  std::uint64_t run(std::uint64_t iterations) const override;

 private:
  LoopbackConnectWorkload(int listener, int port) : listener_(listener), port_(port) {}
  std::string name_ = "loopback TCP connect+accept+close";
  std::vector<std::string> events_ = {"inet_sock_set_state", "tcp_destroy_sock", "sock_send_length",
                                      "sock_recv_length",    "accept4",          "accept"};
  int listener_;
  int port_;
  mutable std::uint32_t next_ = 0;  // the next client address
};

class UserCallWorkload : public BenchLoop {
 public:
  // The name of the loop-callable function whose entry is at `addr` in this process, or
  // nullopt. By address, not by symbol name: an alias (__libc_malloc) or a versioned symbol
  // is the same entry, and an interposed allocator (which a libc uprobe would not see) is not.
  static std::optional<std::string> function_at(std::uintptr_t addr);
  // The loop that calls `function` (allocation functions paired with free, lock functions
  // with their unlock), or nullptr.
  static std::unique_ptr<UserCallWorkload> calling(const std::string& function);
  // Every function some loop calls ("malloc", "free", "pthread_mutex_lock", ...).
  static std::vector<std::string> functions();

  const std::string& name() const override { return name_; }
  const char* kind() const override { return "user call"; }
  const std::vector<std::string>& members() const override { return calls_; }
  std::uint64_t run(std::uint64_t iterations) const override;

 private:
  UserCallWorkload(std::string name, int loop, std::vector<std::string> calls)
      : name_(std::move(name)), loop_(loop), calls_(std::move(calls)) {}
  std::string name_;
  int loop_;
  std::vector<std::string> calls_;
};

// Where `file_offset` of the file at `path` is mapped executable in this process, or nullopt
// when this process does not map it (compared by device and inode, so links and
// /proc/self/root prefixes do not matter).
std::optional<std::uintptr_t> self_address_of(const std::string& path, std::uint64_t file_offset);

}  // namespace loupe

#endif  // LOUPE_CLI_PROBE_BENCH_SRC_BENCH_WORKLOAD_HPP
