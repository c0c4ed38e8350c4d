// SPDX-License-Identifier: Apache-2.0
//
// What one frame costs to symbolize: on a warm cache (the steady state of a profiling
// session), for a process seen for the first time whose files are already cached (a new
// worker of a known binary), and fully cold (maps read and every ELF file parsed).
// The stacks are real addresses of this process: functions of this binary, libc and
// libstdc++; kernel frames are addresses of real kallsyms entries.
#include <benchmark/benchmark.h>
#include <dlfcn.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include <malloc.h>

#include <memory>

#include "../common/benchmark_main.hpp"
#include "loupe/symbolizer.hpp"
#include "unwind_chain.h"

namespace {

__attribute__((noinline)) int bench_local_function(int x) {
  return x * 3 + 1;
}

constexpr int kStackDepth = 16;

std::vector<std::uint64_t> user_stack() {
  const char* libc_fns[] = {
      "malloc", "free",  "printf", "memcpy", "qsort", "nanosleep", "pthread_mutex_lock",
      "read",   "write", "getenv", "strtol", "fopen"};
  std::vector<std::uint64_t> addrs;
  addrs.push_back(reinterpret_cast<std::uint64_t>(&bench_local_function) + 2);
  addrs.push_back(reinterpret_cast<std::uint64_t>(&user_stack) + 8);
  for (const char* f : libc_fns)
    if (void* p = ::dlsym(RTLD_DEFAULT, f)) addrs.push_back(reinterpret_cast<std::uint64_t>(p) + 4);
  // libstdc++ text: a function the bench uses anyway.
  addrs.push_back(reinterpret_cast<std::uint64_t>(::dlsym(RTLD_DEFAULT, "_ZdlPv")) + 1);
  while (addrs.size() < kStackDepth) addrs.push_back(addrs[addrs.size() % 4]);
  addrs.resize(kStackDepth);
  return addrs;
}

std::vector<std::uint64_t> kernel_stack() {
  std::vector<std::uint64_t> all;
  std::ifstream in("/proc/kallsyms");
  std::string line;
  while (std::getline(in, line)) {
    std::istringstream ls(line);
    std::string addr, type;
    ls >> addr >> type;
    if (type == "T" || type == "t") all.push_back(std::stoull(addr, nullptr, 16));
  }
  std::vector<std::uint64_t> out;
  std::mt19937_64 rng(42);
  for (int i = 0; i < kStackDepth && !all.empty(); ++i) out.push_back(all[rng() % all.size()] + 5);
  if (!out.empty() && out[0] == 5) out.clear();  // kptr_restrict: all zero
  return out;
}

// Honesty check: a fast lookup that resolves nothing would measure nothing.
void count_resolved(benchmark::State& state, const std::vector<loupe_frame>& out) {
  int resolved = 0;
  for (const loupe_frame& f : out) resolved += f.resolution < LOUPE_UNRESOLVED_NO_SYMBOL;
  state.counters["resolved"] = resolved;
}

void report(benchmark::State& state, std::size_t frames_per_iteration) {
  state.SetItemsProcessed(static_cast<std::int64_t>(state.iterations() * frames_per_iteration));
  state.counters["ns_per_frame"] =
      benchmark::Counter(static_cast<double>(state.iterations() * frames_per_iteration),
                         benchmark::Counter::kIsRate | benchmark::Counter::kInvert);
}

void BM_UserStackCacheHit(benchmark::State& state) {
  auto addrs = user_stack();
  auto sym = loupe::make_symbolizer();
  std::vector<loupe_frame> out(addrs.size());
  auto pid = static_cast<std::uint32_t>(::getpid());
  sym->symbolize(pid, LOUPE_FRAME_USER, addrs.data(), kStackDepth, out.data());
  for (auto _ : state) {
    sym->symbolize(pid, LOUPE_FRAME_USER, addrs.data(), kStackDepth, out.data());
    benchmark::DoNotOptimize(out.data());
  }
  count_resolved(state, out);
  report(state, addrs.size());
}
BENCHMARK(BM_UserStackCacheHit);

void BM_KernelStackCacheHit(benchmark::State& state) {
  auto addrs = kernel_stack();
  if (addrs.empty()) {
    state.SkipWithError("kallsyms shows no addresses (run as root)");
    return;
  }
  auto sym = loupe::make_symbolizer();
  std::vector<loupe_frame> out(addrs.size());
  sym->symbolize(0, LOUPE_FRAME_KERNEL, addrs.data(), kStackDepth, out.data());
  for (auto _ : state) {
    sym->symbolize(0, LOUPE_FRAME_KERNEL, addrs.data(), kStackDepth, out.data());
    benchmark::DoNotOptimize(out.data());
  }
  count_resolved(state, out);
  report(state, addrs.size());
}
BENCHMARK(BM_KernelStackCacheHit);

void BM_JitStackCacheHit(benchmark::State& state) {
  // A perf map with 1000 JIT functions in an anonymous region of this process.
  void* region = ::mmap(nullptr, 1 << 20, PROT_READ, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  auto base = reinterpret_cast<std::uint64_t>(region);
  std::string path = "/tmp/perf-" + std::to_string(::getpid()) + ".map";
  {
    std::ofstream map(path);
    for (int i = 0; i < 1000; ++i)
      map << std::hex << base + i * 0x400 << " 400 Jit::fn" << std::dec << i << "\n";
  }
  std::vector<std::uint64_t> addrs;
  for (int i = 0; i < kStackDepth; ++i) addrs.push_back(base + (i * 61 % 1000) * 0x400 + 0x10);
  auto sym = loupe::make_symbolizer();
  std::vector<loupe_frame> out(addrs.size());
  auto pid = static_cast<std::uint32_t>(::getpid());
  sym->symbolize(pid, LOUPE_FRAME_USER, addrs.data(), kStackDepth, out.data());
  for (auto _ : state) {
    sym->symbolize(pid, LOUPE_FRAME_USER, addrs.data(), kStackDepth, out.data());
    benchmark::DoNotOptimize(out.data());
  }
  count_resolved(state, out);
  report(state, addrs.size());
  std::remove(path.c_str());
  ::munmap(region, 1 << 20);
}
BENCHMARK(BM_JitStackCacheHit);

// File:line of one address from DWARF (this binary is built with -g), DWARF already open.
void BM_SourceLinesWarm(benchmark::State& state) {
  auto sym = loupe::make_symbolizer();
  auto pid = static_cast<std::uint32_t>(::getpid());
  auto addr = reinterpret_cast<std::uint64_t>(&bench_local_function) + 2;
  loupe::SourceLocation loc[4];
  if (sym->source_lines(pid, addr, loc, 4) == 0) {
    state.SkipWithError("no DWARF for this binary (or built without libdw)");
    return;
  }
  for (auto _ : state) benchmark::DoNotOptimize(sym->source_lines(pid, addr, loc, 4));
}
BENCHMARK(BM_SourceLinesWarm);

// New process, known files: /proc/PID/maps read again, ELF tables from the file cache.
void BM_UserStackProcessMiss(benchmark::State& state) {
  auto addrs = user_stack();
  auto sym = loupe::make_symbolizer();
  std::vector<loupe_frame> out(addrs.size());
  auto pid = static_cast<std::uint32_t>(::getpid());
  sym->symbolize(pid, LOUPE_FRAME_USER, addrs.data(), kStackDepth, out.data());
  for (auto _ : state) {
    sym->invalidate(pid);
    sym->symbolize(pid, LOUPE_FRAME_USER, addrs.data(), kStackDepth, out.data());
    benchmark::DoNotOptimize(out.data());
  }
  count_resolved(state, out);
  report(state, addrs.size());
}
BENCHMARK(BM_UserStackProcessMiss);

// Nothing cached: maps read, this binary, libc and libstdc++ parsed.
void BM_UserStackColdMiss(benchmark::State& state) {
  auto addrs = user_stack();
  std::vector<loupe_frame> out(addrs.size());
  auto pid = static_cast<std::uint32_t>(::getpid());
  for (auto _ : state) {
    auto sym = loupe::make_symbolizer();
    sym->symbolize(pid, LOUPE_FRAME_USER, addrs.data(), kStackDepth, out.data());
    benchmark::DoNotOptimize(out.data());
  }
  count_resolved(state, out);
  report(state, addrs.size());
}
BENCHMARK(BM_UserStackColdMiss)->Unit(benchmark::kMicrosecond);

// First kernel frame of a session: /proc/kallsyms read and sorted.
void BM_KernelColdLoad(benchmark::State& state) {
  auto addrs = kernel_stack();
  if (addrs.empty()) {
    state.SkipWithError("kallsyms shows no addresses (run as root)");
    return;
  }
  loupe_frame out{};
  for (auto _ : state) {
    auto sym = loupe::make_symbolizer();
    sym->symbolize(0, LOUPE_FRAME_KERNEL, addrs.data(), 1, &out);
    benchmark::DoNotOptimize(out);
  }
}
BENCHMARK(BM_KernelColdLoad)->Unit(benchmark::kMillisecond);

}  // namespace

// DWARF unwinding of a captured user stack (this process's own chain, built without frame
// pointers; the capture is tests/symbolizer/unwind_chain.c): the cost per sample that
// unwind = "dwarf" adds in user space, warm (the process's Dwfl exists, its CFI read) and
// for the first sample of a process (a new Dwfl, every executable file reported).
struct Captured {
  std::unique_ptr<unwind_capture> c = std::make_unique<unwind_capture>();
  loupe_user_regs regs{};
  std::uint32_t len = 0;
  Captured() {
    unwind_chain_level3(c.get(), 5);
    regs.size = sizeof(regs);
    regs.arch = LOUPE_ARCH_X86_64;
    regs.mask = (1ull << 17) - 1;
    for (int i = 0; i < 17; ++i) regs.regs[i] = c->regs[i];
    len = std::min<std::uint32_t>(c->len, 8192);  // the BPF side's default slice
  }
};

std::vector<std::uint64_t> executable_file_starts() {
  std::vector<std::uint64_t> out;
  std::ifstream in("/proc/self/maps");
  std::string line;
  while (std::getline(in, line)) {
    unsigned long long lo = 0, hi = 0;
    char perms[8] = {};
    char path[512] = {};
    if (std::sscanf(line.c_str(), "%llx-%llx %7s %*s %*s %*s %511s", &lo, &hi, perms, path) == 5 &&
        perms[2] == 'x' && path[0] == '/')
      out.push_back(lo);
  }
  return out;
}

void BM_UnwindWarm(benchmark::State& state) {
  Captured cap;
  auto sym = loupe::make_symbolizer();
  auto pid = static_cast<std::uint32_t>(::getpid());
  std::uint64_t out[127];
  loupe::UserUnwind r = sym->unwind_user(pid, cap.regs, cap.c->stack, cap.len, out, 127);
  for (auto _ : state) {
    r = sym->unwind_user(pid, cap.regs, cap.c->stack, cap.len, out, 127);
    benchmark::DoNotOptimize(out);
  }
  state.counters["frames"] = r.n;
  state.counters["status"] = r.status;
}
BENCHMARK(BM_UnwindWarm)->Unit(benchmark::kMicrosecond);

void BM_UnwindFirstOfProcess(benchmark::State& state) {
  Captured cap;
  auto pid = static_cast<std::uint32_t>(::getpid());
  std::uint64_t out[127];
  loupe::UserUnwind r{};
  double heap = 0;
  std::uint64_t modules = 0;
  for (auto _ : state) {
    state.PauseTiming();
    auto sym = loupe::make_symbolizer();
    // A running session has read the maps and the symbol tables of the files its stacks
    // touch: symbolize one address per executable file mapping, so the heap delta below is
    // the unwinder's own (its Dwfl and the CFI it read).
    std::vector<std::uint64_t> starts = executable_file_starts();
    std::vector<loupe_frame> f(starts.size());
    sym->symbolize(pid, LOUPE_FRAME_USER, starts.data(), static_cast<std::uint32_t>(starts.size()),
                   f.data());
    const auto before = mallinfo2().uordblks;
    state.ResumeTiming();
    r = sym->unwind_user(pid, cap.regs, cap.c->stack, cap.len, out, 127);
    state.PauseTiming();
    heap = static_cast<double>(mallinfo2().uordblks - before);
    modules = sym->stats().unwind_modules;
    sym.reset();
    state.ResumeTiming();
  }
  state.counters["frames"] = r.n;
  state.counters["dwfl_heap_bytes"] = heap;  // the process's Dwfl after one unwind
  state.counters["modules"] = static_cast<double>(modules);
}
BENCHMARK(BM_UnwindFirstOfProcess)->Unit(benchmark::kMicrosecond);

// The kernel rows need kallsyms' addresses (root): without them they are left out, said
// once, rather than each failing.
int main(int argc, char** argv) {
  return loupe_bench::benchmark_main(argc, argv, [] {
    const std::string filter = benchmark::GetBenchmarkFilter();  // "" or "." by default
    if (!kernel_stack().empty() || !(filter.empty() || filter == ".")) return;
    std::fprintf(stderr, "BM_Kernel* left out: kallsyms shows no addresses (run as root)\n");
    benchmark::SetBenchmarkFilter("-BM_Kernel");
  });
}
