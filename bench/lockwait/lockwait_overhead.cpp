// SPDX-License-Identifier: Apache-2.0
//
// Added cost per futex wait: two threads ping-pong through FUTEX_WAIT/FUTEX_WAKE (every
// round is one wait + one wake per thread), timed with nothing attached, with empty
// programs on sys_enter/exit_futex, and with lockwait's futex programs (with and without
// user stacks). Root only. Usage: lockwait_overhead [rounds=20000]
#include <linux/futex.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <thread>

#include "empty_futex.skel.h"
#include "lockwait.skel.h"

namespace {

std::atomic<int> g_word{0};

long futex(std::atomic<int>* w, int op, int val) {
  return syscall(SYS_futex, reinterpret_cast<int*>(w), op, val, nullptr, nullptr, 0);
}

// Thread A waits for 1, sets 0; thread B waits for 0, sets 1: each round both wait once.
double ns_per_round(int rounds) {
  g_word = 0;
  auto t0 = std::chrono::steady_clock::now();
  std::thread b([&] {
    for (int i = 0; i < rounds; ++i) {
      while (g_word.load() != 0) futex(&g_word, FUTEX_WAIT_PRIVATE, 1);
      g_word = 1;
      futex(&g_word, FUTEX_WAKE_PRIVATE, 1);
    }
  });
  for (int i = 0; i < rounds; ++i) {
    while (g_word.load() != 1) futex(&g_word, FUTEX_WAIT_PRIVATE, 0);
    g_word = 0;
    futex(&g_word, FUTEX_WAKE_PRIVATE, 1);
  }
  b.join();
  auto dt = std::chrono::steady_clock::now() - t0;
  return std::chrono::duration<double, std::nano>(dt).count() / rounds;
}

double best_of(int rounds) {
  double best = 1e18;
  for (int i = 0; i < 5; ++i) best = std::min(best, ns_per_round(rounds));
  return best;
}

}  // namespace

int main(int argc, char** argv) {
  int rounds = argc > 1 ? std::atoi(argv[1]) : 20000;
  if (geteuid() != 0) {
    std::fprintf(stderr, "needs root\n");
    return 0;
  }
  double none = best_of(rounds);

  auto* e = empty_futex_bpf__open_and_load();
  if (!e || empty_futex_bpf__attach(e)) return 1;
  double empty = best_of(rounds);
  empty_futex_bpf__destroy(e);

  auto run_lockwait = [&](bool stacks) {
    auto* s = lockwait_bpf__open();
    s->rodata->targ_user_stacks = stacks;
    s->rodata->loupe_filter_tgid = static_cast<unsigned>(getpid());
    bpf_program__set_autoload(s->progs.lw_futex_wait_enter, false);
    bpf_program__set_autoload(s->progs.lw_futex_wait_exit, false);
    bpf_program__set_autoload(s->progs.lw_futex_waitv_enter, false);
    bpf_program__set_autoload(s->progs.lw_futex_waitv_exit, false);
    bpf_program__set_autoload(s->progs.lw_contention_begin_btf, false);
    bpf_program__set_autoload(s->progs.lw_contention_end_btf, false);
    bpf_program__set_autoload(s->progs.lw_contention_begin, false);
    bpf_program__set_autoload(s->progs.lw_contention_end, false);
    bpf_program__set_autoload(s->progs.lw_pthread_lock, false);
    if (lockwait_bpf__load(s)) return -1.0;
    auto* l1 = bpf_program__attach(s->progs.lw_futex_enter);
    auto* l2 = bpf_program__attach(s->progs.lw_futex_exit);
    double v = best_of(rounds);
    bpf_link__destroy(l1);
    bpf_link__destroy(l2);
    lockwait_bpf__destroy(s);
    return v;
  };
  double lw_nostack = run_lockwait(false);
  double lw_stack = run_lockwait(true);
  // Per round: 2 waits (+ 2 wakes, which lockwait only counts as non-wait ops).
  std::printf("futex ping-pong, ns per round (2 waits + 2 wakes), best of 5 x %d rounds\n", rounds);
  std::printf("  nothing attached        %8.0f\n", none);
  std::printf("  empty programs          %8.0f  (+%.0f ns per wait)\n", empty, (empty - none) / 2);
  std::printf("  lockwait, no stacks     %8.0f  (+%.0f ns per wait over empty)\n", lw_nostack,
              (lw_nostack - empty) / 2);
  std::printf("  lockwait, user stacks   %8.0f  (+%.0f ns per wait over empty)\n", lw_stack,
              (lw_stack - empty) / 2);
  return 0;
}
