// SPDX-License-Identifier: Apache-2.0
//
// End to end through the CLI on the real kernel: `loupe run PROFILE -- workload` with the
// jsonl sink, then loupe's records are checked against what the workload measured itself.
// Root only; skipped when the loupe binary was not built.
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <regex>
#include <string>
#include <vector>

#include "cli_run.hpp"

namespace fs = std::filesystem;
using nlohmann::json;

namespace {

using loupe::test::RunResult;

class LockwaitE2E : public loupe::test::CliRun {
 public:
  // Also a folded sink: the tests check the file it writes.
  RunResult run(const std::string& plugin_body, const std::string& cmd) {
    return CliRun::run("[[plugins]]\nname = \"lockwait\"\n" + plugin_body +
                           "\n[[sinks]]\nname = \"folded\"\nvalue = \"wait_ns\"\n",
                       {cmd});
  }
};

std::vector<const json*> finals(const RunResult& r, const std::string& kind,
                                const std::string& name) {
  std::vector<const json*> out;
  for (const auto& rec : r.records)
    if (rec.value("kind", "") == kind && rec.value("name", "") == name &&
        rec.value("is_final", false))
      out.push_back(&rec);
  return out;
}

double health(const RunResult& r, const std::string& name) {
  for (const json* h : finals(r, "health", name)) return (*h)["health"]["value"].get<double>();
  return -1;
}

bool frames_contain(const json& stack, const std::string& symbol) {
  for (const auto& f : stack["stack"]["frames"])
    if (f["symbol"].is_string() && f["symbol"].get<std::string>() == symbol) return true;
  return false;
}

std::string describe(const json& stack) {
  std::string s;
  for (const auto& f : stack["stack"]["frames"])
    s += (f["symbol"].is_string() ? f["symbol"].get<std::string>() : "?") + ";";
  return s;
}

struct MutexRun {
  RunResult r;
  std::string addr;
  double workload_ns = 0;
  const json* hist = nullptr;
  std::vector<const json*> stacks;
};

MutexRun run_mutex(LockwaitE2E& t, const std::string& body,
                   const std::string& workload = LOCKWAIT_MUTEX) {
  MutexRun m;
  // 4 threads x 15 iterations x 2 ms hold: ~0.2 s of holding, seconds of waiting.
  m.r = t.run(body, workload + " 4 15 2000");
  std::smatch sm;
  if (std::regex_search(m.r.output, sm,
                        std::regex("lock_addr=(0x[0-9a-f]+) total_wait_ns=([0-9]+)"))) {
    m.addr = sm[1];
    m.workload_ns = std::stod(sm[2]);
  }
  for (const json* h : finals(m.r, "histogram", "lock_wait"))
    if ((*h)["labels"].value("addr", "") == m.addr) m.hist = h;
  for (const json* s : finals(m.r, "stack", "lock_wait"))
    if ((*s)["labels"].value("addr", "") == m.addr) m.stacks.push_back(s);
  return m;
}

double stack_wait_ns(const json& s) {
  for (const auto& v : s["stack"]["values"])
    if (v["name"] == "wait_ns") return v["value"].get<double>();
  return 0;
}

}  // namespace

TEST_F(LockwaitE2E, HoldersNameTheFunctionThatReleasedTheLock) {
  // Who blocks me: every wait on g_lock ended when another worker released it in
  // contend_on_g_lock (through release_g_lock, the frame fp unwinding skips).
  auto m = run_mutex(*this, "kernel = false\n");
  ASSERT_EQ(m.r.exit_code, 0) << m.r.output;
  ASSERT_NE(m.hist, nullptr) << m.r.output;
  const double wait_ns = (*m.hist)["histogram"]["sum"].get<double>();
  double released_ns = 0, by_releaser = 0;
  std::string first;
  for (const json* s : finals(m.r, "stack", "lock_holder")) {
    if ((*s)["labels"].value("addr", "") != m.addr) continue;
    released_ns += stack_wait_ns(*s);
    if (frames_contain(*s, "contend_on_g_lock")) by_releaser += stack_wait_ns(*s);
    if (first.empty()) first = describe(*s);
  }
  std::printf(
      "  g_lock: %.1f ms waited, %.1f ms ended by a wake, %.1f ms by contend_on_g_lock "
      "(%s)\n",
      wait_ns / 1e6, released_ns / 1e6, by_releaser / 1e6, first.c_str());
  // A wait may end without a wake (the lock came free before the thread slept), so not
  // all of it; but the releases of a contended mutex end most of it.
  EXPECT_GE(released_ns, 0.8 * wait_ns);
  EXPECT_GE(by_releaser, 0.9 * released_ns);
  EXPECT_EQ(health(m.r, "holders_full"), 0);
}

TEST_F(LockwaitE2E, MutexWaitMatchesTheWorkloadsOwnFigureAndIsNamed) {
  auto m = run_mutex(*this, "kernel = false\n");
  ASSERT_EQ(m.r.exit_code, 0) << m.r.output;
  ASSERT_FALSE(m.addr.empty()) << m.r.output;
  ASSERT_GT(m.workload_ns, 0) << "no contention at all: " << m.r.output;
  ASSERT_NE(m.hist, nullptr) << "no lock_wait histogram for " << m.addr << "\n" << m.r.output;
  const json& h = *m.hist;
  EXPECT_EQ(h["labels"]["lock"], "g_lock") << h.dump();
  EXPECT_EQ(h["labels"]["type"], "futex");
  EXPECT_EQ(h["labels"]["rank"], "1") << "g_lock is the most waited-on lock";
  double loupe_ns = h["histogram"]["sum"].get<double>();
  EXPECT_NEAR(loupe_ns, m.workload_ns, 0.10 * m.workload_ns)
      << "loupe " << loupe_ns << " ns vs workload " << m.workload_ns << " ns";
  EXPECT_EQ(health(m.r, "inflight_full"), 0);
  EXPECT_EQ(health(m.r, "unmatched"), 0);
  // Every workload thread has finished its waits: the slots kept idle for a thread's
  // next wait must not show as waits in progress.
  auto in_flight = finals(m.r, "metric", "in_flight");
  ASSERT_FALSE(in_flight.empty());
  EXPECT_EQ((*in_flight[0])["metric"]["value"].get<double>(), 0) << in_flight[0]->dump();
  EXPECT_EQ(health(m.r, "waiters_full"), 0);
  EXPECT_EQ(health(m.r, "stack_failures_user"), 0);

  // The stacks go on past the waiting function to its caller (lockwait_unwind_e2e_test
  // checks the direct caller itself).
  ASSERT_FALSE(m.stacks.empty());
  double stacks_ns = 0;
  bool worker = false;
  for (const json* s : m.stacks) {
    stacks_ns += stack_wait_ns(*s);
    worker |= frames_contain(*s, "worker");
  }
  EXPECT_TRUE(worker) << describe(*m.stacks[0]);
  EXPECT_NEAR(stacks_ns, loupe_ns, 0.01 * loupe_ns) << "stack samples carry all the wait";

  // The per-thread breakdown adds up to the lock's total.
  double threads_ns = 0;
  for (const json* t : finals(m.r, "metric", "thread_wait_total"))
    if ((*t)["labels"].value("addr", "") == m.addr)
      threads_ns += (*t)["metric"]["value"].get<double>();
  EXPECT_NEAR(threads_ns, loupe_ns, 0.01 * loupe_ns);

  // The summary event says what kind of contention this is: ~2 ms holds.
  bool event = false;
  for (const json* e : finals(m.r, "event", "lock"))
    if ((*e)["event"]["fields"].value("addr", "") == m.addr) {
      event = true;
      EXPECT_EQ((*e)["event"]["fields"]["pattern"], "long_hold") << e->dump();
    }
  EXPECT_TRUE(event);
  // The folded sink turned the stack samples into a flame-graph input.
  EXPECT_TRUE(fs::exists(dir_ + "/out/lock_wait.folded"));
}

// Overflow contract (issue 27): room for one lock row, and the workload waits on several
// futex words (its g_lock, the start barrier, the joins). The waits of the refused locks
// still reach their lock's record from the (lock, thread, stack) rows, but without their
// latency distribution: every futex wait that ended is in one lock's histogram buckets or
// counted in locks_full (WARN, naming max_locks), and the workload's own count of its
// slept-on g_lock waits is among them.
TEST_F(LockwaitE2E, TinyLockMapCountsEveryWaitItCannotKeep) {
  auto m = run_mutex(*this, "kernel = false\nmax_locks = 1\n");
  ASSERT_EQ(m.r.exit_code, 0) << m.r.output;
  std::smatch sm;
  ASSERT_TRUE(std::regex_search(m.r.output, sm, std::regex("contended=([0-9]+)"))) << m.r.output;
  const std::uint64_t contended = std::stoull(sm[1]);
  ASSERT_GT(contended, 0u) << "no contention at all: " << m.r.output;
  std::uint64_t kept = 0, kept_g_lock = 0, waits = 0;
  int with_buckets = 0;
  for (const json* h : finals(m.r, "histogram", "lock_wait")) {
    std::uint64_t in_buckets = 0;
    for (const auto& b : (*h)["histogram"]["buckets"])
      in_buckets += b["count"].get<std::uint64_t>();
    kept += in_buckets;
    with_buckets += in_buckets > 0;
    waits += (*h)["histogram"]["count"].get<std::uint64_t>();
    if (h == m.hist) kept_g_lock = in_buckets;
  }
  const std::uint64_t lost = m.r.expect_loss("locks_full", "max_locks");
  auto ended = finals(m.r, "metric", "futex_waits");
  ASSERT_FALSE(ended.empty()) << m.r.output;
  const auto produced = static_cast<std::uint64_t>((*ended[0])["metric"]["value"].get<double>());
  std::printf(
      "  futex waits: %llu ended, %llu in a histogram, %llu counted lost (%llu g_lock "
      "waits slept on)\n",
      static_cast<unsigned long long>(produced), static_cast<unsigned long long>(kept),
      static_cast<unsigned long long>(lost), static_cast<unsigned long long>(contended));
  EXPECT_EQ(kept + lost, produced) << "kept " << kept << ", lost " << lost;
  EXPECT_EQ(waits, produced) << "the waiter rows keep every wait's count";
  EXPECT_GT(lost, 0u) << "the workload waits on more than one futex word";
  EXPECT_EQ(with_buckets, 1);
  // g_lock's slept-on waits were either kept or counted lost, never dropped.
  EXPECT_GE(kept_g_lock + lost, contended);
  EXPECT_GT(health(m.r, "lost_wait_ns"), 0);
}

// Rule lock_contention (README): the lock the workload's 4 threads fight over is said to
// hold them, with the figures of the same run; a lone thread's lock says nothing.
TEST_F(LockwaitE2E, FindingNamesTheContendedLockWithItsWaitersAndTheirShare) {
  auto m = run_mutex(*this, "kernel = false\n[[sinks]]\nname = \"findings\"\n");
  ASSERT_EQ(m.r.exit_code, 0) << m.r.output;
  ASSERT_NE(m.hist, nullptr) << m.r.output;
  std::smatch sm;
  ASSERT_TRUE(std::regex_search(m.r.output, sm, std::regex("threads_ns=([0-9]+)"))) << m.r.output;
  const double threads_ns = std::stod(sm[1]);
  const double workload_share = m.workload_ns / threads_ns;

  std::vector<const json*> found;
  for (const json* f : finals(m.r, "finding", "lock_contention"))
    if ((*f)["labels"].value("addr", "") == m.addr) found.push_back(f);
  ASSERT_EQ(found.size(), 1u) << m.r.output;
  const json& f = (*found[0])["finding"];
  const json& ev = f["evidence"];
  std::printf("  %s\n  the workload: %.0f ms waited in %.0f ms of its threads' time (%.0f %%)\n",
              f["statement"].get<std::string>().c_str(), m.workload_ns / 1e6, threads_ns / 1e6,
              100 * workload_share);
  EXPECT_EQ(f["rule"], "lock_contention");
  EXPECT_EQ(ev["lock"], "g_lock");
  // The thread that took the lock first may never have slept on it.
  const int threads = ev["threads"].get<int>();
  EXPECT_TRUE(threads == 3 || threads == 4) << threads;
  const double hist_ns = m.hist->at("histogram")["sum"].get<double>();
  EXPECT_NEAR(ev["wait_ns"].get<double>(), hist_ns, 0.01 * hist_ns);
  const double share = ev["share"].get<double>();
  EXPECT_NEAR(share, ev["wait_ns"].get<double>() / ev["threads_span_ns"].get<double>(), 1e-9);
  EXPECT_DOUBLE_EQ(f["weight"].get<double>(), share);
  // Over the waiters' spans (first wait to last), not the 4 threads' whole lives: at least
  // the workload's own share, and never more than all of the time.
  EXPECT_GE(share, 0.9 * workload_share);
  EXPECT_LE(share, 1.0);
  const std::string statement = f["statement"];
  EXPECT_NE(statement.find("lock g_lock"), std::string::npos) << statement;
  EXPECT_NE(statement.find(std::to_string(threads) + " threads waited"), std::string::npos)
      << statement;
  std::ifstream in(dir_ + "/out/findings.txt");
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  EXPECT_NE(text.find("lock contention: " + statement), std::string::npos) << text;

  // One thread alone never waits on its lock: nothing to say about it.
  RunResult lone = run("kernel = false\n", std::string(LOCKWAIT_MUTEX) + " 1 15 2000");
  ASSERT_EQ(lone.exit_code, 0) << lone.output;
  EXPECT_TRUE(finals(lone, "finding", "lock_contention").empty()) << lone.output;
}

TEST_F(LockwaitE2E, PthreadStacksNameTheDirectCaller) {
  auto m = run_mutex(*this, "kernel = false\npthread_stacks = true\n");
  ASSERT_EQ(m.r.exit_code, 0) << m.r.output;
  ASSERT_NE(m.hist, nullptr) << m.r.output;
  double loupe_ns = (*m.hist)["histogram"]["sum"].get<double>();
  // The workload's own window around each lock also holds the pthread_mutex_lock uprobe's
  // trap, which no futex wait contains: it bounds loupe's sum from above. From below, the
  // time the waiters slept in those windows (wall less their CPU time and run-queue
  // delay), which only the futex waits loupe times can hold. The wall alone is no lower
  // bound on a busy machine: a trap returns to user space through a reschedule point, and
  // beside two busy loops in an emulated guest the 60 traps and the preemptions they let
  // in took half the windows (loupe 258 ms of 509, round 9).
  std::smatch sm;
  ASSERT_TRUE(std::regex_search(m.r.output, sm, std::regex("blocked_ns=([0-9]+)"))) << m.r.output;
  const double blocked_ns = std::stod(sm[1]);
  std::printf("  loupe %.1f ms; the workload: %.1f ms in pthread_mutex_lock, %.1f ms asleep\n",
              loupe_ns / 1e6, m.workload_ns / 1e6, blocked_ns / 1e6);
  EXPECT_LE(loupe_ns, 1.02 * m.workload_ns);
  EXPECT_GE(loupe_ns, 0.98 * blocked_ns);
  // Every contended wait on g_lock took the stack of its pthread_mutex_lock call, whose
  // first caller frame is contend_on_g_lock.
  double named_ns = 0;
  for (const json* s : m.stacks)
    if (frames_contain(*s, "contend_on_g_lock")) named_ns += stack_wait_ns(*s);
  EXPECT_GE(named_ns, 0.9 * loupe_ns) << (m.stacks.empty() ? "" : describe(*m.stacks[0]));
  for (const json* p : finals(m.r, "metric", "pthread_attributed_waits"))
    EXPECT_GT((*p)["metric"]["value"].get<double>(), 0);
}

// Built without frame pointers (-O2 -fomit-frame-pointer, as distributions build): the
// frame-pointer walk from libc's futex call finds no caller; the copied stack unwound with
// .eh_frame names the waiting function and its callers, with the wait total unchanged.
TEST_F(LockwaitE2E, DwarfNamesTheWaitersOfABinaryWithoutFramePointers) {
  auto named = [&](const MutexRun& m, double* total) {
    double in_fn = 0, all = 0;
    for (const json* s : m.stacks) {
      all += stack_wait_ns(*s);
      if (frames_contain(*s, "contend_on_g_lock") && frames_contain(*s, "worker"))
        in_fn += stack_wait_ns(*s);
    }
    *total = all;
    return all > 0 ? in_fn / all : 0.0;
  };
  auto d = run_mutex(*this, "kernel = false\nunwind = \"dwarf\"\n", LOCKWAIT_MUTEX_NOFP);
  ASSERT_EQ(d.r.exit_code, 0) << d.r.output;
  ASSERT_NE(d.hist, nullptr) << d.r.output;
  const double loupe_ns = (*d.hist)["histogram"]["sum"].get<double>();
  EXPECT_NEAR(loupe_ns, d.workload_ns, 0.10 * d.workload_ns);
  double dwarf_total = 0, fp_total = 0;
  const double dwarf = named(d, &dwarf_total);
  EXPECT_NEAR(dwarf_total, loupe_ns, 0.01 * loupe_ns) << "stack rows carry all the wait";
  double unwound = 0;
  for (const json* h : finals(d.r, "health", "stacks"))
    if ((*h)["health"].value("component", "") == "lockwait/unwind_ok")
      unwound = (*h)["health"]["value"].get<double>();
  EXPECT_GT(unwound, 0);
  auto f = run_mutex(*this, "kernel = false\nunwind = \"fp\"\n", LOCKWAIT_MUTEX_NOFP);
  ASSERT_EQ(f.r.exit_code, 0) << f.r.output;
  const double fp = named(f, &fp_total);
  std::printf("  wait named contend_on_g_lock <- worker: dwarf %.0f%%, fp %.0f%%\n", 100 * dwarf,
              100 * fp);
  EXPECT_GE(dwarf, 0.9) << (d.stacks.empty() ? "" : describe(*d.stacks[0]));
  EXPECT_LT(fp, 0.5);
}

TEST_F(LockwaitE2E, KernelLockContentionHasSymbolizedKernelStacks) {
  if (!fs::exists("/sys/kernel/tracing/events/lock/contention_begin"))
    GTEST_SKIP() << "lock:contention_begin is absent on this kernel";
  auto r = run("futex = false\n", std::string(LOCKWAIT_KERNEL) + " 4 400");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  auto hists = finals(r, "histogram", "lock_wait");
  ASSERT_FALSE(hists.empty()) << "no kernel contention seen\n" << r.output;
  double waits = 0;
  for (const json* h : hists) {
    EXPECT_EQ((*h)["labels"]["kind"], "kernel");
    waits += (*h)["histogram"]["count"].get<double>();
  }
  EXPECT_GT(waits, 0);
  // Kernel stacks resolve through kallsyms; the contended lock sits on the mmap path.
  bool symbolized = false, mm_path = false;
  for (const json* s : finals(r, "stack", "lock_wait")) {
    for (const auto& f : (*s)["stack"]["frames"]) {
      if (f["kind"] != "kernel" || !f["symbol"].is_string()) continue;
      symbolized = true;
      std::string sym = f["symbol"];
      if (sym.find("mmap") != std::string::npos || sym.find("munmap") != std::string::npos ||
          sym.find("fault") != std::string::npos || sym.find("vma") != std::string::npos)
        mm_path = true;
    }
  }
  EXPECT_TRUE(symbolized);
  EXPECT_TRUE(mm_path) << "no mm frame in any kernel stack";
  // A stack map drops a stack whose hash bucket another stack holds (-EEXIST); with
  // hundreds of distinct kernel stacks a few collide. They are counted, and must stay rare.
  double kstack_failures = health(r, "stack_failures_kernel");
  EXPECT_GE(kstack_failures, 0) << "the failure count is reported";
  EXPECT_LE(kstack_failures, 0.02 * waits) << waits << " waits";
}
