// SPDX-License-Identifier: Apache-2.0
//
// Added cost per futex operation of lockwait's futex programs, against empty programs on
// the same two tracepoints (syscalls:sys_enter_futex / sys_exit_futex), in one run:
//
//   wait  FUTEX_WAIT on a word that does not hold the expected value: returns EAGAIN at
//         once, so every call is one full wait path (pairing, per-lock and per-waiter
//         aggregation, optionally a user stack) with no sleep to drown it in noise
//   wake  FUTEX_WAKE with nobody waiting: the non-wait path (one counter)
//   pingpong  two threads hand a word back and forth through WAIT/WAKE: real sleeps and
//         wake-ups, the contended case (wall time is noisy on a 2-CPU VM; BPF time is not)
//
// Modes, interleaved round by round so drift hits every mode alike: none, empty,
// lockwait (no stacks), lockwait+stacks (user stacks by frame pointers: unwind = "fp"),
// lockwait+tables (user stacks by the in-kernel unwinder, unwind = "tables", the default,
// with this process's tables loaded as a session loads its target's). Wall time: median over
// rounds. BPF time: the programs' own run time per call from bpf_enable_stats, in a second pass
// (stats add two clock reads per program, so they stay off while wall time is taken).
//
//   lockwait_overhead [--rounds R] [--calls N] [--pingpong N]
#include <bpf/bpf.h>
#include <bpf/libbpf.h>
#include <linux/futex.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <map>
#include <memory>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "../common/bench_peers.hpp"
#include "../common/self_unwind_tables.hpp"
#include "empty_futex.skel.h"
#include "lockwait.skel.h"

namespace {

std::atomic<int> g_word{0};

long futex(std::atomic<int>* w, int op, int val) {
  return syscall(SYS_futex, reinterpret_cast<int*>(w), op, val, nullptr, nullptr, 0);
}

double now_ns() {
  timespec ts{};
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec * 1e9 + ts.tv_nsec;
}

// Each returns ns per futex call it made, and how many calls that was.
struct LoopResult {
  double ns_per_call;
  double calls;
};

LoopResult loop_wait(long n) {
  g_word = 0;
  double t0 = now_ns();
  for (long i = 0; i < n; ++i) futex(&g_word, FUTEX_WAIT_PRIVATE, 1);  // EAGAIN
  return {(now_ns() - t0) / n, static_cast<double>(n)};
}

LoopResult loop_wake(long n) {
  double t0 = now_ns();
  for (long i = 0; i < n; ++i) futex(&g_word, FUTEX_WAKE_PRIVATE, 1);
  return {(now_ns() - t0) / n, static_cast<double>(n)};
}

// Thread A waits for 1 and sets 0; thread B waits for 0 and sets 1. Calls are counted,
// since a wait whose word already changed returns without sleeping.
LoopResult loop_pingpong(long rounds) {
  g_word = 0;
  std::atomic<long> calls{0};
  double t0 = now_ns();
  std::thread b([&] {
    long c = 0;
    for (long i = 0; i < rounds; ++i) {
      while (g_word.load() != 0) futex(&g_word, FUTEX_WAIT_PRIVATE, 1), ++c;
      g_word = 1;
      futex(&g_word, FUTEX_WAKE_PRIVATE, 1), ++c;
    }
    calls += c;
  });
  long c = 0;
  for (long i = 0; i < rounds; ++i) {
    while (g_word.load() != 1) futex(&g_word, FUTEX_WAIT_PRIVATE, 0), ++c;
    g_word = 0;
    futex(&g_word, FUTEX_WAKE_PRIVATE, 1), ++c;
  }
  b.join();
  calls += c;
  return {(now_ns() - t0) / rounds, static_cast<double>(calls.load())};
}

struct Links {
  std::vector<bpf_link*> links;
  ~Links() {
    for (auto* l : links) bpf_link__destroy(l);
  }
  void add(bpf_program* p) {
    bpf_link* l = bpf_program__attach(p);
    if (!l) throw std::runtime_error(std::string("attach ") + bpf_program__name(p));
    links.push_back(l);
  }
};

struct LockwaitDeleter {
  void operator()(lockwait_bpf* s) const { lockwait_bpf__destroy(s); }
};

// lockwait's object with only the futex syscall pair loaded, as the plugin loads it for a
// session with a target pid.
std::unique_ptr<lockwait_bpf, LockwaitDeleter> load_lockwait(bool stacks, bool tables = false) {
  std::unique_ptr<lockwait_bpf, LockwaitDeleter> s(lockwait_bpf__open());
  if (!s) throw std::runtime_error("opening the lockwait object");
  s->rodata->targ_user_stacks = stacks;
  s->rodata->targ_unwind_tables = tables;
  if (tables)
    loupe_bench::size_self_unwind_maps(s.get());
  else
    for (bpf_map* m : {s->maps.loupe_unwind_rows, s->maps.loupe_unwind_procs,
                       s->maps.loupe_unwind_stacks, s->maps.loupe_unwind_slots})
      bpf_map__set_max_entries(m, 1);
  s->rodata->loupe_filter_tgid = static_cast<unsigned>(getpid());
  for (auto* p :
       {s->progs.lw_futex_wait_enter, s->progs.lw_futex_wait_exit, s->progs.lw_futex_waitv_enter,
        s->progs.lw_futex_waitv_exit, s->progs.lw_contention_begin_btf,
        s->progs.lw_contention_end_btf, s->progs.lw_contention_begin, s->progs.lw_contention_end,
        s->progs.lw_pthread_lock})
    bpf_program__set_autoload(p, false);
  if (lockwait_bpf__load(s.get())) throw std::runtime_error("loading the lockwait object");
  return s;
}

struct Mode {
  std::string name;
  std::vector<bpf_program*> progs;  // empty = nothing attached
};

double median(std::vector<double> v) {
  if (v.empty()) return -1;
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

void measure(const char* title, const std::vector<Mode>& modes, int rounds,
             const std::function<LoopResult()>& loop) {
  std::map<std::string, std::vector<double>> wall;
  loop();  // warm up
  for (int r = 0; r < rounds; ++r) {
    for (const auto& m : modes) {
      Links links;
      for (auto* p : m.progs) links.add(p);
      wall[m.name].push_back(loop().ns_per_call);
    }
  }
  std::map<std::string, double> bpf_ns;
  int stats_fd = bpf_enable_stats(BPF_STATS_RUN_TIME);
  for (const auto& m : modes) {
    if (m.progs.empty() || stats_fd < 0) continue;
    Links links;
    for (auto* p : m.progs) links.add(p);
    loupe_bench::ProgCost before = loupe_bench::prog_cost(m.progs);
    double calls = 0;
    for (int r = 0; r < std::max(1, rounds / 2); ++r) calls += loop().calls;
    loupe_bench::ProgCost after = loupe_bench::prog_cost(m.progs);
    bpf_ns[m.name] = static_cast<double>(after.run_ns - before.run_ns) / calls;
  }
  if (stats_fd >= 0) close(stats_fd);
  double none = median(wall["none"]);
  double empty = median(wall["empty"]) - none;
  std::printf("\n%s (%d rounds, median)\n", title, rounds);
  std::printf("  %-16s %12s %14s %14s %16s\n", "mode", "ns/call", "added ns/call", "x empty",
              "BPF ns/call");
  for (const auto& m : modes) {
    double v = median(wall[m.name]);
    std::printf("  %-16s %12.1f %14.1f %14.2f %16.1f\n", m.name.c_str(), v, v - none,
                m.progs.empty() ? 0.0 : (v - none) / empty, bpf_ns[m.name]);
  }
  if (bpf_ns.count("lockwait"))
    std::printf(
        "  lockwait programs above empty ones: %.1f ns/call (no stacks), %.1f ns/call "
        "(user stacks, fp), %.1f ns/call (user stacks, tables)\n",
        bpf_ns["lockwait"] - bpf_ns["empty"], bpf_ns["lockwait+stacks"] - bpf_ns["empty"],
        bpf_ns["lockwait+tables"] - bpf_ns["empty"]);
}

}  // namespace

int main(int argc, char** argv) {
  int rounds = 7;
  long calls = 300000, pingpong = 20000;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if (i + 1 < argc && a == "--rounds")
      rounds = std::atoi(argv[++i]);
    else if (i + 1 < argc && a == "--calls")
      calls = std::atol(argv[++i]);
    else if (i + 1 < argc && a == "--pingpong")
      pingpong = std::atol(argv[++i]);
    else {
      std::fprintf(stderr, "usage: %s [--rounds R] [--calls N] [--pingpong N]\n", argv[0]);
      return 2;
    }
  }
  if (geteuid() != 0) {
    std::fprintf(stderr, "lockwait_overhead: needs root (loads BPF)\n");
    return 77;
  }
  try {
    auto* e = empty_futex_bpf__open_and_load();
    if (!e) throw std::runtime_error("loading the empty programs");
    std::unique_ptr<empty_futex_bpf, void (*)(empty_futex_bpf*)> empty(e, empty_futex_bpf__destroy);
    auto plain = load_lockwait(false);
    auto stacks = load_lockwait(true);
    auto tables = load_lockwait(true, true);
    auto self_tables = loupe_bench::load_self_unwind_tables(tables.get());
    std::vector<Mode> modes = {
        {"none", {}},
        {"empty", {e->progs.empty_enter, e->progs.empty_exit}},
        {"lockwait", {plain->progs.lw_futex_enter, plain->progs.lw_futex_exit}},
        {"lockwait+stacks", {stacks->progs.lw_futex_enter, stacks->progs.lw_futex_exit}},
        {"lockwait+tables", {tables->progs.lw_futex_enter, tables->progs.lw_futex_exit}},
    };
    measure("futex WAIT returning EAGAIN: one full wait path per call", modes, rounds,
            [&] { return loop_wait(calls); });
    measure("futex WAKE with no waiter: the non-wait path", modes, rounds,
            [&] { return loop_wake(calls); });
    measure("two-thread WAIT/WAKE ping-pong: ns per round (wall), per futex call (BPF)", modes,
            rounds, [&] { return loop_pingpong(pingpong); });
  } catch (const std::exception& ex) {
    std::fprintf(stderr, "lockwait_overhead: %s\n", ex.what());
    return 1;
  }
  return 0;
}
