// SPDX-License-Identifier: Apache-2.0
//
// What the overhead benches share: an external tracer (funclatency, biolatency, bpftrace)
// run for one measurement, and the kernel's run-time accounting of BPF programs found by id
// (a peer's programs are the ones loaded after a given id). Header-only: each bench is one
// translation unit.
#ifndef LOUPE_BENCH_PEERS_HPP
#define LOUPE_BENCH_PEERS_HPP

#include <bpf/bpf.h>
#include <bpf/libbpf.h>
#include <signal.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <chrono>
#include <cstdint>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

namespace loupe_bench {

inline double now_s() {
  timespec ts{};
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<double>(ts.tv_sec) + static_cast<double>(ts.tv_nsec) * 1e-9;
}

// Kernel-side cost of BPF programs (bpf_enable_stats run time), summed over programs.
struct ProgCost {
  std::uint64_t run_ns = 0;
  std::uint64_t runs = 0;
};

inline ProgCost prog_cost_by_id(const std::vector<std::uint32_t>& ids) {
  ProgCost c;
  for (auto id : ids) {
    int fd = bpf_prog_get_fd_by_id(id);
    if (fd < 0) continue;
    bpf_prog_info info{};
    std::uint32_t len = sizeof(info);
    if (bpf_obj_get_info_by_fd(fd, &info, &len) == 0) {
      c.run_ns += info.run_time_ns;
      c.runs += info.run_cnt;
    }
    close(fd);
  }
  return c;
}

// The name the kernel keeps for program `id` (its first 15 characters); "" when gone.
inline std::string prog_name_of_id(std::uint32_t id) {
  int fd = bpf_prog_get_fd_by_id(id);
  if (fd < 0) return "";
  bpf_prog_info info{};
  std::uint32_t len = sizeof(info);
  std::string name;
  if (bpf_obj_get_info_by_fd(fd, &info, &len) == 0) name = info.name;
  close(fd);
  return name;
}

inline ProgCost prog_cost(const std::vector<bpf_program*>& progs) {
  ProgCost c;
  for (auto* p : progs) {
    bpf_prog_info info{};
    std::uint32_t len = sizeof(info);
    if (bpf_obj_get_info_by_fd(bpf_program__fd(p), &info, &len) == 0) {
      c.run_ns += info.run_time_ns;
      c.runs += info.run_cnt;
    }
  }
  return c;
}

inline std::uint32_t prog_id_of_fd(int fd) {
  bpf_prog_info info{};
  std::uint32_t len = sizeof(info);
  bpf_obj_get_info_by_fd(fd, &info, &len);
  return info.id;
}

inline std::uint32_t max_prog_id() {
  std::uint32_t id = 0, next = 0;
  while (bpf_prog_get_next_id(id, &next) == 0) id = next;
  return id;
}

inline std::vector<std::uint32_t> prog_ids_after(std::uint32_t floor) {
  std::vector<std::uint32_t> ids;
  std::uint32_t id = floor, next = 0;
  while (bpf_prog_get_next_id(id, &next) == 0) ids.push_back(id = next);
  return ids;
}

// A wall-clock budget for one bench program: on a slow or loaded machine the rounds stop
// once it is spent and the program prints what it measured so far, instead of being killed
// by an outer timeout with nothing printed.
class Budget {
 public:
  explicit Budget(double seconds) : end_(now_s() + seconds), seconds_(seconds) {}
  bool spent() const { return now_s() > end_; }
  double seconds() const { return seconds_; }

 private:
  double end_;
  double seconds_;
};

// An external tracer, attached (it printed `ready_text`) from construction to destruction.
class Peer {
 public:
  Peer(std::vector<std::string> argv, const char* ready_text) {
    int out[2];
    if (pipe(out) != 0) throw std::runtime_error("pipe");
    pid_ = fork();
    if (pid_ == 0) {
      dup2(out[1], 1);
      dup2(out[1], 2);
      close(out[0]);
      std::vector<char*> a;
      for (auto& s : argv) a.push_back(s.data());
      a.push_back(nullptr);
      execv(a[0], a.data());
      _exit(127);
    }
    close(out[1]);
    fd_ = out[0];
    std::string seen;
    char buf[512];
    double deadline = now_s() + 20;
    while (seen.find(ready_text) == std::string::npos) {
      ssize_t n = read(fd_, buf, sizeof(buf));
      if (n <= 0 || now_s() > deadline) {
        stop();
        throw std::runtime_error(argv[0] + " did not attach: " + seen);
      }
      seen.append(buf, static_cast<std::size_t>(n));
    }
    // Some tools print before their last attach completes: settle.
    std::this_thread::sleep_for(std::chrono::milliseconds(300));
  }
  ~Peer() { stop(); }
  Peer(const Peer&) = delete;
  Peer& operator=(const Peer&) = delete;

 private:
  void stop() {
    if (pid_ <= 0) return;
    kill(pid_, SIGINT);
    // Drain so the tool never blocks on a full pipe while printing its histogram.
    char buf[4096];
    while (read(fd_, buf, sizeof(buf)) > 0) {
    }
    waitpid(pid_, nullptr, 0);
    close(fd_);
    pid_ = -1;
  }
  pid_t pid_ = -1;
  int fd_ = -1;
};

}  // namespace loupe_bench

#endif  // LOUPE_BENCH_PEERS_HPP
