// SPDX-License-Identifier: Apache-2.0
//
// Added cost per allocation of the memalloc programs, measured in one run on the same
// loop: malloc(64) + free() of this process, through the libc it maps.
//
// Modes, interleaved round by round so drift hits every mode alike: none (the loop
// alone), empty (do-nothing programs on malloc entry, malloc return and free entry: the
// uprobe floor), loupe (memalloc's own programs and maps, set up as the plugin sets them
// up for a pid, every allocation recorded, user stacks by frame pointers: unwind = "fp"),
// loupe-tables (the same with unwind = "tables", the default: the in-kernel unwinder with
// this process's tables loaded as a session loads its target's) and bpftrace (a script keeping the
// same state: size per thread, bytes and count per user stack, live address -> size). Added cost =
// mode - none; the ratio that matters is loupe / empty.
//
//   memalloc_overhead [--rounds R] [--calls N] [--no-peers] [--budget SECONDS]
#include <bpf/bpf.h>
#include <bpf/libbpf.h>
#include <signal.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <functional>
#include <map>
#include <memory>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "../common/bench_peers.hpp"
#include "../common/self_unwind_tables.hpp"
#include "empty_alloc.skel.h"
#include "memalloc.h"
#include "memalloc.skel.h"

namespace {

using loupe_bench::now_s;

__attribute__((noinline)) double loop(long n) {
  double t0 = now_s();
  for (long i = 0; i < n; ++i) {
    void* volatile p = std::malloc(64);
    std::free(p);
  }
  return (now_s() - t0) * 1e9 / static_cast<double>(n);
}

std::string self_libc() {
  std::ifstream maps("/proc/self/maps");
  std::string line;
  while (std::getline(maps, line)) {
    auto slash = line.find('/');
    if (slash == std::string::npos) continue;
    std::string path = line.substr(slash);
    if (path.find("/libc.so") != std::string::npos) return path;
  }
  throw std::runtime_error("no libc in /proc/self/maps");
}

struct Links {
  std::vector<bpf_link*> links;
  ~Links() {
    for (auto* l : links) bpf_link__destroy(l);
  }
  void uprobe(bpf_program* p, const std::string& libc, const char* func, bool ret) {
    LIBBPF_OPTS(bpf_uprobe_opts, o, .retprobe = ret, .func_name = func);
    bpf_link* l = bpf_program__attach_uprobe_opts(p, getpid(), libc.c_str(), 0, &o);
    if (!l) throw std::runtime_error(std::string("attach ") + func + ": " + std::strerror(errno));
    links.push_back(l);
  }
};

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

}  // namespace

int main(int argc, char** argv) {
  int rounds = 5;
  long calls = 5000;
  bool peers = true;
  double budget_s = 240;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if (a == "--rounds" && i + 1 < argc)
      rounds = std::atoi(argv[++i]);
    else if (a == "--calls" && i + 1 < argc)
      calls = std::atol(argv[++i]);
    else if (a == "--no-peers")
      peers = false;
    else if (a == "--budget" && i + 1 < argc)
      budget_s = std::atof(argv[++i]);
    else {
      std::fprintf(stderr, "usage: %s [--rounds R] [--calls N] [--no-peers] [--budget SECONDS]\n",
                   argv[0]);
      return 2;
    }
  }
  if (geteuid() != 0) {
    std::fprintf(stderr, "memalloc_overhead: needs root (loads BPF, attaches uprobes)\n");
    return 77;
  }
  try {
    const std::string libc = self_libc();
    std::unique_ptr<empty_alloc_bpf, void (*)(empty_alloc_bpf*)> empty(
        empty_alloc_bpf__open_and_load(), &empty_alloc_bpf__destroy);
    if (!empty) throw std::runtime_error("loading the empty programs");
    // The plugin's setup for a session with a target pid and default keys, user only.
    using MaPtr = std::unique_ptr<memalloc_bpf, void (*)(memalloc_bpf*)>;
    auto load_memalloc = [](bool tables) {
      MaPtr ma(memalloc_bpf__open(), &memalloc_bpf__destroy);
      if (!ma) throw std::runtime_error("opening the memalloc object");
      ma->rodata->loupe_filter_tgid = static_cast<__u32>(getpid());
      ma->rodata->targ_unwind_tables = tables;
      if (tables)
        loupe_bench::size_self_unwind_maps(ma.get());
      else
        for (bpf_map* m : {ma->maps.loupe_unwind_rows, ma->maps.loupe_unwind_procs,
                           ma->maps.loupe_unwind_stacks, ma->maps.loupe_unwind_slots})
          bpf_map__set_max_entries(m, 1);
      auto& pr = ma->progs;
      for (auto* prog : {pr.ma_kmalloc, pr.ma_kmem_cache_alloc, pr.ma_kfree, pr.ma_kmem_cache_free,
                         pr.ma_page_alloc, pr.ma_page_free})
        bpf_program__set_autoload(prog, false);
      if (memalloc_bpf__load(ma.get())) throw std::runtime_error("loading the memalloc object");
      return ma;
    };
    MaPtr ma = load_memalloc(false);
    MaPtr mt = load_memalloc(true);
    auto self_tables = loupe_bench::load_self_unwind_tables(mt.get());
    auto& p = ma->progs;
    auto& pt = mt->progs;

    const std::string pid = std::to_string(getpid());
    const std::string script =
        "uprobe:" + libc + ":malloc /pid == " + pid + "/ { @size[tid] = arg0; } " +
        "uretprobe:" + libc + ":malloc /pid == " + pid + " && @size[tid]/ { " +
        "@bytes[ustack] = sum(@size[tid]); @count[ustack] = count(); " +
        "@live[retval] = @size[tid]; delete(@size[tid]); } " + "uprobe:" + libc +
        ":free /pid == " + pid + "/ { delete(@live[arg0]); } " +
        // Printing every stack map at exit would time the peer's report, not its probes.
        "END { clear(@size); clear(@bytes); clear(@count); clear(@live); }";

    struct Mode {
      std::string name;
      std::function<void(Links&)> attach;
      bool bpftrace = false;
    };
    std::vector<Mode> modes = {
        {"none", [](Links&) {}},
        {"empty",
         [&](Links& l) {
           l.uprobe(empty->progs.empty_return, libc, "malloc", true);
           l.uprobe(empty->progs.empty_entry, libc, "malloc", false);
           l.uprobe(empty->progs.empty_entry, libc, "free", false);
         }},
        {"loupe",
         [&](Links& l) {
           l.uprobe(p.ma_alloc_exit, libc, "malloc", true);
           l.uprobe(p.ma_malloc, libc, "malloc", false);
           l.uprobe(p.ma_free, libc, "free", false);
         }},
        {"loupe-tables",
         [&](Links& l) {
           l.uprobe(pt.ma_alloc_exit, libc, "malloc", true);
           l.uprobe(pt.ma_malloc, libc, "malloc", false);
           l.uprobe(pt.ma_free, libc, "free", false);
         }},
    };
    if (peers && access("/usr/bin/bpftrace", X_OK) == 0)
      modes.push_back({"bpftrace", [](Links&) {}, true});

    std::map<std::string, std::vector<double>> ns;
    int stats_fd = bpf_enable_stats(BPF_STATS_RUN_TIME);  // closed at exit
    std::map<std::string, std::vector<bpf_program*>> progs = {
        {"empty", {empty->progs.empty_entry, empty->progs.empty_return}},
        {"loupe", {p.ma_malloc, p.ma_alloc_exit, p.ma_free}},
        {"loupe-tables", {pt.ma_malloc, pt.ma_alloc_exit, pt.ma_free}}};
    loop(calls);  // warm up
    loupe_bench::Budget budget(budget_s);
    int done = 0;
    for (int r = 0; r < rounds; ++r, ++done) {
      if (budget.spent()) {
        std::printf(
            "(time budget of %.0f s spent after %d of %d rounds: medians below are over those)\n",
            budget.seconds(), r, rounds);
        break;
      }
      for (const auto& m : modes) {
        try {
          std::unique_ptr<loupe_bench::Peer> bt;
          if (m.bpftrace)
            bt = std::make_unique<loupe_bench::Peer>(
                std::vector<std::string>{"/usr/bin/bpftrace", "-e", script}, "Attaching");
          Links links;
          m.attach(links);
          ns[m.name].push_back(loop(calls));
        } catch (const std::exception& e) {
          std::fprintf(stderr, "%s: %s (mode skipped)\n", m.name.c_str(), e.what());
        }
      }
    }
    std::printf("malloc(64) + free() x %ld, %d rounds, median ns per pair (added = mode - none)\n",
                calls, done);
    double none = median(ns["none"]);
    double empty_added = ns.count("empty") ? median(ns["empty"]) - none : 0;
    for (const auto& m : modes) {
      if (!ns.count(m.name) || ns[m.name].empty()) continue;
      double med = median(ns[m.name]);
      std::printf("  %-12s %10.0f ns  added %10.0f ns", m.name.c_str(), med, med - none);
      if (m.name != "none" && m.name != "empty" && empty_added > 0)
        std::printf("  (%.2fx the empty set)", (med - none) / empty_added);
      if (stats_fd >= 0 && progs.count(m.name)) {
        auto [run_ns, runs] = loupe_bench::prog_cost(progs[m.name]);
        // Three program runs per malloc + free pair.
        if (runs) std::printf("  BPF run time %.0f ns per pair", 3.0 * run_ns / runs);
      }
      std::printf("\n");
    }
  } catch (const std::exception& e) {
    std::fprintf(stderr, "memalloc_overhead: %s\n", e.what());
    return 1;
  }
  return 0;
}
