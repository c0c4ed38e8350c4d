// SPDX-License-Identifier: Apache-2.0
//
// Added cost per block I/O, in one run: a loop of O_DIRECT 4 KiB reads of a file on the
// disk under the current directory, with nothing attached (none), with do-nothing
// programs on block_rq_insert/issue/complete (empty), and with biolat's programs and
// maps set up as the plugin sets them up (loupe: per-process breakdown on, no filter),
// and, when installed, libbpf-tools' biolatency and a bpftrace tracepoint script that
// pairs block_rq_issue with block_rq_complete into a hist() (bpftrace's own biolatency.bt
// needs kprobes). All are system-wide, as the plugin is here.
// Modes are interleaved round by round so drift hits each alike; median of the rounds.
// "BPF ns/IO" is the programs' own run time per I/O (bpf_enable_stats), measured in a
// separate pass, interleaved the same way, so the stats do not tax the wall-clock pass.
//
//   biolat_overhead [--rounds R=15] [--ios N=2000] [--dir D] [--no-peers]
//
// BIO_NO_PROC=1 in the environment: biolat without its per-process table (per_process =
// false), to see that table's share of the cost.
#include <bpf/bpf.h>
#include <bpf/libbpf.h>
#include <fcntl.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <map>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include "../common/bench_peers.hpp"
#include "biolat.skel.h"
#include "empty_rq.skel.h"
#include "rq_prototype.hpp"

namespace {

constexpr std::size_t kBlock = 4096;
constexpr std::size_t kFileBlocks = 4096;  // 16 MiB: reads hop around it

using loupe_bench::now_s;

class DirectFile {
 public:
  explicit DirectFile(const std::string& dir) : path_(dir + "/biolat-bench.dat") {
    std::vector<char> buf(1 << 20, 'b');
    int fd = open(path_.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
    if (fd < 0) throw std::runtime_error("create " + path_ + ": " + strerror(errno));
    for (std::size_t i = 0; i < kFileBlocks * kBlock / buf.size(); ++i)
      if (write(fd, buf.data(), buf.size()) != static_cast<ssize_t>(buf.size()))
        throw std::runtime_error("write " + path_);
    fsync(fd);
    close(fd);
    fd_ = open(path_.c_str(), O_RDONLY | O_DIRECT);
    if (fd_ < 0) throw std::runtime_error("O_DIRECT open " + path_ + ": " + strerror(errno));
    if (posix_memalign(&buf_, kBlock, kBlock)) throw std::runtime_error("posix_memalign");
  }
  ~DirectFile() {
    close(fd_);
    free(buf_);
    unlink(path_.c_str());
  }
  // ns per I/O of n synchronous O_DIRECT reads, striding so no two are adjacent.
  double loop(long n) {
    double t0 = now_s();
    for (long i = 0; i < n; ++i) {
      off_t off = static_cast<off_t>((static_cast<std::size_t>(i) * 97) % kFileBlocks * kBlock);
      if (pread(fd_, buf_, kBlock, off) != static_cast<ssize_t>(kBlock))
        throw std::runtime_error("pread");
    }
    return (now_s() - t0) * 1e9 / static_cast<double>(n);
  }

 private:
  std::string path_;
  int fd_ = -1;
  void* buf_ = nullptr;
};

// One measured mode: our programs stay loaded for the whole run and are attached per
// round; a peer is started per round and found by the ids of the programs it loaded.
struct Mode {
  std::string name;
  std::vector<bpf_program*> progs;
  std::function<std::unique_ptr<loupe_bench::Peer>()> peer = nullptr;
  std::vector<bpf_link*> links = {};
  std::unique_ptr<loupe_bench::Peer> running = nullptr;
  std::vector<std::uint32_t> ids = {};  // the programs whose run time counts
  void attach() {
    std::uint32_t floor = loupe_bench::max_prog_id();
    if (peer) {
      running = peer();
      ids = loupe_bench::prog_ids_after(floor);
    }
    for (auto* p : progs) {
      bpf_link* l = bpf_program__attach(p);
      if (!l) throw std::runtime_error(name + ": attach " + bpf_program__name(p));
      links.push_back(l);
      if (ids.size() < progs.size()) ids.push_back(loupe_bench::prog_id_of_fd(bpf_program__fd(p)));
    }
  }
  void detach() {
    for (auto* l : links) bpf_link__destroy(l);
    links.clear();
    running.reset();
  }
  bool attached_anything() const { return !progs.empty() || peer; }
};

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

}  // namespace

int main(int argc, char** argv) {
  int rounds = 15;
  long ios = 2000;
  std::string dir = ".";
  bool peers = true;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if (a == "--no-peers")
      peers = false;
    else if (i + 1 < argc && a == "--rounds")
      rounds = std::atoi(argv[++i]);
    else if (i + 1 < argc && a == "--ios")
      ios = std::atol(argv[++i]);
    else if (i + 1 < argc && a == "--dir")
      dir = argv[++i];
    else {
      std::fprintf(stderr, "usage: %s [--rounds R] [--ios N] [--dir D] [--no-peers]\n", argv[0]);
      return 2;
    }
  }
  if (geteuid() != 0) {
    std::fprintf(stderr, "biolat_overhead: needs root (loads BPF programs)\n");
    return 77;
  }
  try {
    DirectFile file(dir);
    empty_rq_bpf* empty = empty_rq_bpf__open_and_load();
    if (!empty) throw std::runtime_error("load empty programs");
    biolat_bpf* bio = biolat_bpf__open();
    if (!bio) throw std::runtime_error("open biolat");
    std::string why;
    bio->rodata->targ_rq_single_arg =
        loupe::biolat::rq_tracepoint_single_arg("block_rq_issue", &why).value_or(true);
    bio->rodata->targ_bio_arg = static_cast<std::uint32_t>(
        loupe::biolat::tracepoint_pointer_arg("block_bio_backmerge", "bio", &why).value_or(0));
    bio->rodata->targ_per_process = !getenv("BIO_NO_PROC");
    for (auto* p :
         {bio->progs.bio_raw_insert, bio->progs.bio_raw_issue, bio->progs.bio_raw_complete,
          bio->progs.bio_raw_rq_merge, bio->progs.bio_raw_backmerge, bio->progs.bio_raw_frontmerge,
          bio->progs.bio_tp_insert, bio->progs.bio_tp_issue, bio->progs.bio_tp_complete,
          bio->progs.bio_tp_rq_merge, bio->progs.bio_tp_backmerge, bio->progs.bio_tp_frontmerge})
      bpf_program__set_autoload(p, false);
    if (biolat_bpf__load(bio)) throw std::runtime_error("load biolat");

    std::vector<Mode> modes;
    modes.push_back({"none", {}});
    modes.push_back(
        {"empty",
         {empty->progs.empty_insert, empty->progs.empty_issue, empty->progs.empty_complete}});
    modes.push_back({"loupe",
                     {bio->progs.bio_btf_insert, bio->progs.bio_btf_issue,
                      bio->progs.bio_btf_complete, bio->progs.bio_btf_rq_merge,
                      bio->progs.bio_btf_backmerge, bio->progs.bio_btf_frontmerge}});
    if (peers && access("/usr/sbin/biolatency", X_OK) == 0)
      modes.push_back(
          {"biolatency", {}, [] {
             // -Q: queue time too, as biolat's total; stdbuf: "Tracing" must not
             // sit in a full stdio buffer behind our pipe.
             return std::make_unique<loupe_bench::Peer>(
                 std::vector<std::string>{"/usr/bin/stdbuf", "-oL", "/usr/sbin/biolatency", "-Q"},
                 "Tracing");
           }});
    if (peers && access("/usr/bin/bpftrace", X_OK) == 0)
      modes.push_back(
          {"bpftrace", {}, [] {
             return std::make_unique<loupe_bench::Peer>(
                 std::vector<std::string>{
                     "/usr/bin/bpftrace", "-e",
                     "tracepoint:block:block_rq_issue { @s[args->dev, args->sector] = nsecs; } "
                     "tracepoint:block:block_rq_complete /@s[args->dev, args->sector]/ { "
                     "@us = hist((nsecs - @s[args->dev, args->sector]) / 1000); "
                     "delete(@s[args->dev, args->sector]); }"},
                 "Attaching");
           }});
    file.loop(ios / 4);  // warm up the device path
    std::map<std::string, std::vector<double>> wall;
    for (int r = 0; r < rounds; ++r)
      for (auto& m : modes) {
        try {
          m.attach();
          wall[m.name].push_back(file.loop(ios));
        } catch (const std::exception& e) {
          std::fprintf(stderr, "  %s: %s (skipped)\n", m.name.c_str(), e.what());
        }
        m.detach();
      }
    // The BPF pass is interleaved round by round too: one round of one mode can land on a
    // busy moment of a shared machine, and a single run of each once decided the ratio.
    int stats_fd = bpf_enable_stats(BPF_STATS_RUN_TIME);
    std::map<std::string, std::vector<double>> bpf_rounds;
    // Each program's share, by its name: where a mode's time per I/O goes.
    std::map<std::string, std::map<std::string, std::vector<double>>> by_program;
    for (int r = 0; r < rounds && stats_fd >= 0; ++r)
      for (auto& m : modes) {
        if (!m.attached_anything() || wall[m.name].empty()) continue;
        m.attach();
        std::vector<loupe_bench::ProgCost> before;
        for (auto id : m.ids) before.push_back(loupe_bench::prog_cost_by_id({id}));
        file.loop(ios);
        double sum = 0;
        for (std::size_t i = 0; i < m.ids.size(); ++i) {
          const double ns = static_cast<double>(loupe_bench::prog_cost_by_id({m.ids[i]}).run_ns -
                                                before[i].run_ns) /
                            static_cast<double>(ios);
          sum += ns;
          if (ns > 0) by_program[m.name][loupe_bench::prog_name_of_id(m.ids[i])].push_back(ns);
        }
        m.detach();
        bpf_rounds[m.name].push_back(sum);
      }
    if (stats_fd >= 0) close(stats_fd);
    std::map<std::string, double> bpf_ns;
    for (const auto& [name, v] : bpf_rounds) bpf_ns[name] = median(v);

    double none = median(wall["none"]);
    double empty_added = median(wall["empty"]) - none;
    std::printf("O_DIRECT 4 KiB reads, %ld per round (%d rounds, median)\n", ios, rounds);
    std::printf("  %-11s %12s %14s %13s %12s\n", "mode", "ns/IO", "added ns/IO", "x empty",
                "BPF ns/IO");
    for (auto& m : modes) {
      if (wall[m.name].empty()) continue;
      double w = median(wall[m.name]);
      std::printf("  %-11s %12.0f %14.0f %13.2f %12.0f\n", m.name.c_str(), w, w - none,
                  empty_added > 0 ? (w - none) / empty_added : 0.0, bpf_ns[m.name]);
    }
    std::printf("  BPF ns/IO by program (median of %d rounds):\n", rounds);
    for (const auto& [mode, progs] : by_program) {
      std::printf("    %-11s", mode.c_str());
      for (const auto& [name, ns] : progs) std::printf(" %s %.0f", name.c_str(), median(ns));
      std::printf("\n");
    }
    // The ratio per round, of the two modes run back to back, then its median: a slow
    // stretch of the machine lands on both sides of one ratio instead of on one median.
    const auto& ours = bpf_rounds["loupe"];
    const auto& theirs = bpf_rounds["biolatency"];
    if (!ours.empty() && ours.size() == theirs.size()) {
      std::vector<double> ratios;
      for (std::size_t r = 0; r < ours.size(); ++r)
        if (theirs[r] > 0) ratios.push_back(ours[r] / theirs[r]);
      if (!ratios.empty())
        std::printf(
            "  loupe / biolatency, BPF ns/IO: %.2fx (median of %zu rounds' ratios; %.2fx "
            "of the medians)\n",
            median(ratios), ratios.size(), bpf_ns["loupe"] / bpf_ns["biolatency"]);
    }
    biolat_bpf__destroy(bio);
    empty_rq_bpf__destroy(empty);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "biolat_overhead: %s\n", e.what());
    return 1;
  }
  return 0;
}
