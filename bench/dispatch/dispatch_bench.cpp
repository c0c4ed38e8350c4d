// SPDX-License-Identifier: Apache-2.0
//
// Ring dispatch benchmarks (root; results and method in docs/performance.md "dispatch"):
//   BM_Stream/<mode>    end-to-end records/s with a getppid() producer emitting bursts of
//                       16 into a 16 MiB ring: plain libbpf ring_buffer__poll with a no-op
//                       callback (wake-up per record, or watermark) vs loupe's dispatcher
//                       (watermark, or wake-up per record), same run.
//   BM_Drain/<mode>     consumer-only: time to drain a pre-filled ring (no producer).
//   BM_ProducerCost/<v> ns per getppid() call: no program, in-kernel aggregation, emitting
//                       (watermark), emitting (wake-up per record).
//   BM_LossOnset/<k/s>  a paced producer at N thousand records/s for LOUPE_BENCH_LOSS_SECONDS
//                       (default 2; the 10 s: set it to 10): records lost.
// LOUPE_BENCH_SMOKE=1: one short iteration of each (ctest's label bench).
#include <benchmark/benchmark.h>
#include <bpf/bpf.h>
#include <bpf/libbpf.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <thread>

#include "../common/benchmark_main.hpp"
#include "dispatch/bounded_queue.hpp"
#include "dispatch/byte_queue.hpp"
#include "dispatch/ring_dispatcher.hpp"
#include "dispatch_bench.skel.h"

namespace {

using Clock = std::chrono::steady_clock;
constexpr std::uint32_t kRecordType = 0x6201;
constexpr std::uint32_t kRecordLen = 24;
constexpr std::uint32_t kBurst = 16;
// ctest's smoke run (LOUPE_BENCH_SMOKE=1): one short iteration of each.
const bool kSmoke = loupe_bench::smoke();
const int kIterations = kSmoke ? 1 : 3;

std::uint64_t percpu_sum(int fd, std::uint32_t key) {
  int n = libbpf_num_possible_cpus();
  std::vector<std::uint64_t> v(static_cast<std::size_t>(n));
  if (bpf_map_lookup_elem(fd, &key, v.data()) != 0) return 0;
  std::uint64_t s = 0;
  for (auto x : v) s += x;
  return s;
}

// One loaded producer program; the link is detached on destruction.
class Producer {
 public:
  Producer(bool emit, std::uint32_t burst, std::uint64_t wakeup_bytes) {
    skel_ = dispatch_bench_bpf__open();
    if (!skel_) throw std::runtime_error("open");
    skel_->rodata->targ_tgid = static_cast<__u32>(getpid());
    skel_->rodata->targ_burst = burst;
    skel_->rodata->loupe_wakeup_bytes = wakeup_bytes;
    bpf_program__set_autoload(emit ? skel_->progs.bench_aggregate : skel_->progs.bench_emit, false);
    if (dispatch_bench_bpf__load(skel_)) throw std::runtime_error("load (root?)");
    link_ = bpf_program__attach(emit ? skel_->progs.bench_emit : skel_->progs.bench_aggregate);
    if (!link_) throw std::runtime_error("attach");
  }
  ~Producer() {
    bpf_link__destroy(link_);
    dispatch_bench_bpf__destroy(skel_);
  }
  int ring_fd() const { return bpf_map__fd(skel_->maps.bench_ring); }
  int lost_fd() const { return bpf_map__fd(skel_->maps.bench_ring_lost); }
  std::uint64_t lost() const { return percpu_sum(lost_fd(), 0); }
  static void fire(std::uint64_t calls) {
    for (std::uint64_t i = 0; i < calls; ++i) syscall(SYS_getppid);
  }

 private:
  dispatch_bench_bpf* skel_ = nullptr;
  bpf_link* link_ = nullptr;
};

int noop_sample(void* ctx, void*, std::size_t) {
  static_cast<std::atomic<std::uint64_t>*>(ctx)->fetch_add(1, std::memory_order_relaxed);
  return 0;
}

int noop_decode(void* user, const void*, std::uint32_t) {
  static_cast<std::atomic<std::uint64_t>*>(user)->fetch_add(1, std::memory_order_relaxed);
  return LOUPE_OK;
}

loupe_ring_spec spec_for(const Producer& p, std::atomic<std::uint64_t>* counter) {
  loupe_ring_spec s{};
  s.size = sizeof(s);
  s.map_fd = p.ring_fd();
  s.lost_map_fd = p.lost_fd();
  s.divisor_map_fd = -1;  // measure the dispatcher, not the sampling
  s.name = "bench";
  s.record_type = kRecordType;
  s.record_version = 1;
  s.min_len = s.max_len = kRecordLen;
  s.category = LOUPE_RING_DROPPABLE_SAMPLE;
  s.policy = LOUPE_BP_DROP_NEWEST;
  s.decode = noop_decode;
  s.user = counter;
  return s;
}

// A consumer under test: plain libbpf or the loupe dispatcher.
class Consumer {
 public:
  Consumer(const Producer& p, bool loupe) : p_(p), loupe_(loupe) {
    if (loupe_) {
      if (auto st = rd_.add_ring("bench", spec_for(p, &count_)); !st)
        throw std::runtime_error(st.error());
      rd_.start();
    } else {
      rb_ = ring_buffer__new(p.ring_fd(), noop_sample, &count_, nullptr);
      // Under a watermark the records below it never wake the poll: a quiet poll drains
      // them, as any consumer of a ring written with BPF_RB_NO_WAKEUP must (without it
      // the last burst waited for wait_all's time-out).
      thread_ = std::thread([this] {
        while (!stop_.load(std::memory_order_relaxed))
          if (ring_buffer__poll(rb_, 20) == 0) ring_buffer__consume(rb_);
      });
    }
  }
  ~Consumer() {
    finish();
    if (rb_) ring_buffer__free(rb_);
  }
  // Waits until every record the kernel accepted has been consumed (or queue-dropped);
  // false when they were not within 30 s (the benchmark then reports an error: a rate
  // timed by the time-out measures nothing).
  bool wait_all(std::uint64_t produced) {
    for (auto end = Clock::now() + std::chrono::seconds(30); Clock::now() < end;) {
      std::uint64_t lost = p_.lost(), done = count_.load();
      if (loupe_) {
        auto s = rd_.stats()[0];
        done = s.decoded + s.dropped_queue + s.malformed;
      }
      if (done + lost >= produced) return true;
      std::this_thread::sleep_for(std::chrono::microseconds(200));
    }
    return false;
  }
  void finish() {
    if (loupe_) {
      rd_.stop(Clock::now() + std::chrono::seconds(5));
    } else if (thread_.joinable()) {
      stop_ = true;
      thread_.join();
    }
  }
  std::uint64_t delivered() const { return count_.load(); }
  std::uint64_t dropped_queue() const { return loupe_ ? rd_.stats()[0].dropped_queue : 0; }

 private:
  const Producer& p_;
  bool loupe_;
  std::atomic<std::uint64_t> count_{0};
  loupe::RingDispatcher rd_;
  ring_buffer* rb_ = nullptr;
  std::thread thread_;
  std::atomic<bool> stop_{false};
};

// mode: 0 libbpf + wake-up per record, 1 libbpf + watermark, 2 loupe + watermark,
//       3 loupe + wake-up per record.
void BM_Stream(benchmark::State& state) {
  const int mode = static_cast<int>(state.range(0));
  const bool loupe = mode >= 2;
  const std::uint64_t wakeup = (mode == 0 || mode == 3) ? 0 : 64 * 1024;
  const std::uint64_t kCalls = kSmoke ? 10000 : 100000;
  std::uint64_t delivered = 0, lost = 0, dropped = 0, produced = 0;
  double secs = 0;
  for (auto _ : state) {
    Producer p(true, kBurst, wakeup);
    Consumer c(p, loupe);
    auto t0 = Clock::now();
    Producer::fire(kCalls);
    if (!c.wait_all(kCalls * kBurst)) {
      state.SkipWithError("records not all consumed within 30 s");
      break;
    }
    secs += std::chrono::duration<double>(Clock::now() - t0).count();
    c.finish();
    delivered += c.delivered();
    lost += p.lost();
    dropped += c.dropped_queue();
    produced += kCalls * kBurst;
  }
  state.counters["records_per_s"] = static_cast<double>(delivered) / secs;
  state.counters["lost_kernel_pct"] =
      100.0 * static_cast<double>(lost) / static_cast<double>(produced);
  state.counters["dropped_queue_pct"] =
      100.0 * static_cast<double>(dropped) / static_cast<double>(produced);
  state.SetLabel(mode == 0   ? "libbpf poll, wake-up per record"
                 : mode == 1 ? "libbpf poll, watermark"
                 : mode == 2 ? "loupe dispatcher, watermark"
                             : "loupe dispatcher, wake-up per record");
}
BENCHMARK(BM_Stream)
    ->DenseRange(0, 3)
    ->Iterations(kIterations)
    ->UseRealTime()
    ->Unit(benchmark::kMillisecond);

// Consumer only: fill the ring with the consumer absent, then time the drain.
void BM_Drain(benchmark::State& state) {
  const bool loupe = state.range(0) == 1;
  // 320k records, 10 MB of a 16 MiB ring
  const std::uint64_t kCalls = kSmoke ? 2000 : 20000;
  std::uint64_t delivered = 0;
  double secs = 0;
  for (auto _ : state) {
    Producer p(true, kBurst, ~0ull);  // no wake-up while filling: nobody listens yet
    Producer::fire(kCalls);
    auto t0 = Clock::now();
    Consumer c(p, loupe);
    if (!c.wait_all(kCalls * kBurst)) {
      state.SkipWithError("records not all consumed within 30 s");
      break;
    }
    secs += std::chrono::duration<double>(Clock::now() - t0).count();
    c.finish();
    delivered += c.delivered();
  }
  state.counters["records_per_s"] = static_cast<double>(delivered) / secs;
  state.SetLabel(loupe ? "loupe dispatcher (check + copy + queue + worker decode)"
                       : "libbpf consume, no-op callback");
}
BENCHMARK(BM_Drain)
    ->DenseRange(0, 1)
    ->Iterations(kIterations)
    ->UseRealTime()
    ->Unit(benchmark::kMillisecond);

// 0 no program, 1 aggregate in kernel, 2 emit (watermark), 3 emit (wake-up per record).
void BM_ProducerCost(benchmark::State& state) {
  const int v = static_cast<int>(state.range(0));
  std::unique_ptr<Producer> p;
  std::unique_ptr<Consumer> c;
  if (v >= 1) p = std::make_unique<Producer>(v >= 2, 1, v == 3 ? 0 : 64 * 1024);
  if (v >= 2) c = std::make_unique<Consumer>(*p, true);
  for (auto _ : state) syscall(SYS_getppid);
  if (p) state.counters["kernel_lost"] = static_cast<double>(p->lost());
  state.SetLabel(v == 0   ? "getppid, no program"
                 : v == 1 ? "aggregating in kernel"
                 : v == 2 ? "emitting, watermark wake-up"
                          : "emitting, wake-up per record");
}
BENCHMARK(BM_ProducerCost)->DenseRange(0, 3)->MinTime(kSmoke ? 0.01 : 1.0);

// A producer paced at range(0) thousand records/s into a 16 MiB ring for the duration.
void BM_LossOnset(benchmark::State& state) {
  const double rate = static_cast<double>(state.range(0)) * 1000.0;
  const char* env = std::getenv("LOUPE_BENCH_LOSS_SECONDS");
  const double seconds = env ? std::atof(env) : kSmoke ? 0.05 : 2.0;
  std::uint64_t produced = 0, lost_kernel = 0, dropped = 0;
  double achieved = 0;
  for (auto _ : state) {
    Producer p(true, kBurst, 64 * 1024);
    Consumer c(p, true);
    const auto t0 = Clock::now();
    const auto end =
        t0 + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(seconds));
    const double ns_per_call = 1e9 * kBurst / rate;
    std::uint64_t calls = 0;
    for (auto now = t0; now < end; now = Clock::now()) {
      auto due = t0 + std::chrono::nanoseconds(
                          static_cast<std::int64_t>(static_cast<double>(calls) * ns_per_call));
      if (now < due) continue;  // spin: sleeping would add jitter
      syscall(SYS_getppid);
      ++calls;
    }
    achieved = static_cast<double>(calls * kBurst) /
               std::chrono::duration<double>(Clock::now() - t0).count();
    if (!c.wait_all(calls * kBurst)) {
      state.SkipWithError("records not all consumed within 30 s");
      break;
    }
    c.finish();
    produced += calls * kBurst;
    lost_kernel += p.lost();
    dropped += c.dropped_queue();
  }
  state.counters["achieved_rps"] = achieved;
  state.counters["produced"] = static_cast<double>(produced);
  state.counters["lost_kernel"] = static_cast<double>(lost_kernel);
  state.counters["dropped_queue"] = static_cast<double>(dropped);
}
BENCHMARK(BM_LossOnset)
    ->Arg(250)
    ->Arg(500)
    ->Arg(1000)
    ->Arg(2000)
    ->Arg(4000)
    ->Arg(6000)
    ->Arg(8000)
    ->Iterations(1)
    ->UseRealTime()
    ->Unit(benchmark::kMillisecond);

// Reader -> worker hand-off of 24-byte records, no kernel: the previous design (a
// std::vector per record in a mutex-guarded deque) against the preallocated byte queue.
void BM_QueueHandoff(benchmark::State& state) {
  const bool bytes = state.range(0) == 1;
  const std::uint64_t kN = kSmoke ? 100000 : 1000000;
  std::uint8_t rec[kRecordLen] = {};
  std::uint64_t moved = 0;
  for (auto _ : state) {
    std::atomic<bool> done{false};
    std::uint64_t got = 0;
    if (bytes) {
      loupe::ByteQueue q(16u << 20, 1 << 16);
      std::thread worker([&] {
        loupe::ByteQueue::Slot s;
        while (true) {
          if (q.peek(&s)) {
            benchmark::DoNotOptimize(s.data[0]);
            q.release(s);
            ++got;
          } else if (done.load()) {
            if (q.empty()) break;
          } else {
            q.wait(std::chrono::milliseconds(1));
          }
        }
      });
      for (std::uint64_t i = 0; i < kN; ++i) {
        while (!q.try_push(0, rec, kRecordLen, i)) q.notify();
        if ((i & 63) == 0) q.notify();
      }
      done = true;
      q.wake();
      worker.join();
    } else {
      struct Item {
        std::vector<std::uint8_t> bytes;
        std::uint64_t read_ns;
      };
      loupe::BoundedQueue<Item> q(1 << 16);
      std::thread worker([&] {
        while (true) {
          auto it = q.pop(std::chrono::milliseconds(1));
          if (it) {
            benchmark::DoNotOptimize(it->bytes[0]);
            ++got;
          } else if (done.load() && q.size() == 0) {
            break;
          }
        }
      });
      for (std::uint64_t i = 0; i < kN; ++i)
        while (!q.try_push(Item{std::vector<std::uint8_t>(rec, rec + kRecordLen), i}))
          std::this_thread::yield();
      done = true;
      worker.join();
    }
    moved += got;
  }
  state.counters["records_per_s"] =
      benchmark::Counter(static_cast<double>(moved), benchmark::Counter::kIsRate);
  state.SetLabel(bytes ? "byte queue (arena, one copy)"
                       : "vector per record + locked deque (before)");
}
BENCHMARK(BM_QueueHandoff)
    ->DenseRange(0, 1)
    ->Iterations(kIterations)
    ->UseRealTime()
    ->Unit(benchmark::kMillisecond);

}  // namespace

int main(int argc, char** argv) {
  if (geteuid() != 0) {
    std::fprintf(stderr, "dispatch_bench: needs root (loads BPF programs)\n");
    return 77;
  }
  return loupe_bench::benchmark_main(argc, argv);
}
