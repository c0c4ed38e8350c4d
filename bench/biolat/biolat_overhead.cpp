// SPDX-License-Identifier: Apache-2.0
//
// Added cost per block I/O, in one run: a loop of O_DIRECT 4 KiB reads of a file on the
// disk under the current directory, with nothing attached (none), with do-nothing
// programs on block_rq_insert/issue/complete (empty), and with biolat's programs and
// maps set up as the plugin sets them up (loupe: per-process breakdown on, no filter).
// Modes are interleaved round by round so drift hits each alike; median of the rounds.
// "BPF ns/IO" is the programs' own run time per I/O (bpf_enable_stats), measured in a
// separate pass so the stats do not tax the wall-clock pass.
//
//   biolat_overhead [--rounds R] [--ios N] [--dir D]
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
#include <stdexcept>
#include <string>
#include <vector>

#include "biolat.skel.h"
#include "empty_rq.skel.h"
#include "rq_prototype.hpp"

namespace {

constexpr std::size_t kBlock = 4096;
constexpr std::size_t kFileBlocks = 4096;  // 16 MiB: reads hop around it

double now_s() {
  timespec ts{};
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec + ts.tv_nsec * 1e-9;
}

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

struct ProgCost {
  std::uint64_t run_ns = 0, runs = 0;
};

ProgCost prog_cost(const std::vector<bpf_program*>& progs) {
  ProgCost c;
  for (auto* p : progs) {
    bpf_prog_info info{};
    __u32 len = sizeof(info);
    if (bpf_obj_get_info_by_fd(bpf_program__fd(p), &info, &len) == 0) {
      c.run_ns += info.run_time_ns;
      c.runs += info.run_cnt;
    }
  }
  return c;
}

// One attached mode: its programs stay loaded for the whole run, attached per round.
struct Mode {
  std::string name;
  std::vector<bpf_program*> progs;
  std::vector<bpf_link*> links;
  void attach() {
    for (auto* p : progs) {
      bpf_link* l = bpf_program__attach(p);
      if (!l) throw std::runtime_error(name + ": attach " + bpf_program__name(p));
      links.push_back(l);
    }
  }
  void detach() {
    for (auto* l : links) bpf_link__destroy(l);
    links.clear();
  }
};

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

}  // namespace

int main(int argc, char** argv) {
  int rounds = 7;
  long ios = 3000;
  std::string dir = ".";
  for (int i = 1; i + 1 < argc; i += 2) {
    std::string a = argv[i];
    if (a == "--rounds") rounds = std::atoi(argv[i + 1]);
    else if (a == "--ios") ios = std::atol(argv[i + 1]);
    else if (a == "--dir") dir = argv[i + 1];
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
    bio->rodata->targ_rq_single_arg = loupe::biolat::rq_tracepoint_single_arg("block_rq_issue", &why)
                                          .value_or(true);
    bio->rodata->targ_per_process = true;
    for (auto* p : {bio->progs.bio_raw_insert, bio->progs.bio_raw_issue,
                    bio->progs.bio_raw_complete, bio->progs.bio_tp_insert,
                    bio->progs.bio_tp_issue, bio->progs.bio_tp_complete})
      bpf_program__set_autoload(p, false);
    if (biolat_bpf__load(bio)) throw std::runtime_error("load biolat");

    std::vector<Mode> modes = {
        {"none", {}, {}},
        {"empty", {empty->progs.empty_insert, empty->progs.empty_issue, empty->progs.empty_complete}, {}},
        {"loupe", {bio->progs.bio_btf_insert, bio->progs.bio_btf_issue, bio->progs.bio_btf_complete}, {}}};
    file.loop(ios / 4);  // warm up the device path
    std::map<std::string, std::vector<double>> wall;
    for (int r = 0; r < rounds; ++r)
      for (auto& m : modes) {
        m.attach();
        wall[m.name].push_back(file.loop(ios));
        m.detach();
      }
    int stats_fd = bpf_enable_stats(BPF_STATS_RUN_TIME);
    std::map<std::string, double> bpf_ns;
    for (auto& m : modes) {
      if (m.progs.empty() || stats_fd < 0) continue;
      ProgCost before = prog_cost(m.progs);
      m.attach();
      file.loop(ios);
      m.detach();
      ProgCost after = prog_cost(m.progs);
      bpf_ns[m.name] = static_cast<double>(after.run_ns - before.run_ns) / static_cast<double>(ios);
    }
    if (stats_fd >= 0) close(stats_fd);

    double none = median(wall["none"]);
    double empty_added = median(wall["empty"]) - none;
    std::printf("O_DIRECT 4 KiB reads, %ld per round (%d rounds, median)\n", ios, rounds);
    std::printf("  %-8s %12s %14s %13s %12s\n", "mode", "ns/IO", "added ns/IO", "x empty", "BPF ns/IO");
    for (auto& m : modes) {
      double w = median(wall[m.name]);
      std::printf("  %-8s %12.0f %14.0f %13.2f %12.0f\n", m.name.c_str(), w, w - none,
                  empty_added > 0 ? (w - none) / empty_added : 0.0, bpf_ns[m.name]);
    }
    biolat_bpf__destroy(bio);
    empty_rq_bpf__destroy(empty);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "biolat_overhead: %s\n", e.what());
    return 1;
  }
  return 0;
}
