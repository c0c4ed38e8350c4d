// SPDX-License-Identifier: Apache-2.0
//
// The per-process table of executable regions that appeared at run time, and the
// attribution of CPU samples to them. Pure bookkeeping (no BPF, no host): fed with the
// decoded ring events in their order, unit-tested on its own.
//
// Bounds: at most max_processes processes (exited ones are evicted first, then the least
// recently active); per process at most max_regions live regions (the oldest is evicted)
// and max_retired removed regions kept for the report. Every eviction is counted.
#ifndef LOUPE_JITREGIONS_REGION_TABLE_HPP
#define LOUPE_JITREGIONS_REGION_TABLE_HPP

#include <cstdint>
#include <deque>
#include <map>
#include <string>
#include <vector>

namespace loupe::jitregions {

// kPreexisting: executable anonymous memory the process had when the session attached to
// it (read from /proc/PID/maps); its install time and thread are unknown.
enum class RegionSource { kMmapAnon, kMmapFile, kMprotect, kPreexisting };
const char* to_string(RegionSource s);

struct Region {
  std::uint64_t start = 0;
  std::uint64_t end = 0;         // exclusive
  std::uint32_t generation = 0;  // installs seen at this start address in this process
  std::uint64_t install_ns = 0;  // boot-time ns
  std::uint32_t install_tid = 0;
  RegionSource source = RegionSource::kMprotect;
  std::uint64_t removed_ns = 0;  // 0 while live
  std::uint64_t first_sample_ns = 0;
  std::uint64_t samples = 0;
  std::map<std::uint32_t, std::uint64_t> exec_tids;  // tid -> samples
  bool reported = false;                             // the install was reported in an interval
};

struct ProcessRegions {
  std::uint32_t tgid = 0;
  std::string comm;
  std::map<std::uint64_t, Region> live;  // by start
  std::deque<Region> retired;
  std::map<std::uint64_t, std::uint32_t> generations;  // start -> installs (bounded with live)
  std::uint64_t installs = 0;
  std::uint64_t preexisting = 0;  // regions seeded at attach (not counted as installs)
  std::uint64_t removals = 0;
  std::uint64_t samples = 0;  // every sample of the process seen
  std::uint64_t samples_in_regions = 0;
  std::uint64_t samples_by_installer = 0;  // in a region, on the thread that installed it
  std::uint64_t regions_evicted = 0;
  std::uint64_t retired_dropped = 0;
  std::uint64_t last_active_ns = 0;
  bool exited = false;
  std::vector<std::uint64_t> first_exec_latencies;  // ns, bounded: see kMaxLatencies
};

struct TableLimits {
  std::size_t max_processes = 1024;
  std::size_t max_regions = 4096;
  std::size_t max_retired = 256;
};

class RegionTable {
 public:
  static constexpr std::size_t kMaxLatencies = 4096;
  explicit RegionTable(TableLimits limits = {}) : limits_(limits) {}

  // [start, start+len) became executable. What it overlaps is replaced.
  void install(std::uint32_t tgid, std::uint32_t tid, const std::string& comm, std::uint64_t start,
               std::uint64_t len, std::uint64_t ns, RegionSource source);
  // [start, start+len) stopped being executable (munmap, mprotect without PROT_EXEC):
  // regions it covers are retired, regions it cuts are trimmed or split.
  void remove(std::uint32_t tgid, std::uint64_t start, std::uint64_t len, std::uint64_t ns);
  // A region the process already had when tracing began (the kernel will not replay its
  // mmap): live from `ns` on, with no install time, so no install-to-first-execution
  // latency. Events that follow replace or remove it like any other region.
  void seed(std::uint32_t tgid, const std::string& comm, std::uint64_t start, std::uint64_t len,
            std::uint64_t ns);
  void process_exit(std::uint32_t tgid, std::uint64_t ns);
  void process_exec(std::uint32_t tgid, std::uint64_t ns);

  // One sample at user IP `ip`. Returns the region it falls in (nullptr if none); sets
  // *first_exec_ns to install -> first-execution latency when this is the region's first
  // sample after its install, else leaves it alone.
  const Region* sample(std::uint32_t tgid, std::uint32_t tid, const std::string& comm,
                       std::uint64_t ip, std::uint64_t ns, std::uint64_t* first_exec_ns);

  const std::map<std::uint32_t, ProcessRegions>& processes() const { return procs_; }
  // Drops exited processes (call after they were reported).
  void expire_exited();
  void mark_reported();
  std::uint64_t processes_evicted() const { return processes_evicted_; }

 private:
  ProcessRegions& process(std::uint32_t tgid, const std::string& comm, std::uint64_t ns);
  void retire(ProcessRegions& p, Region r, std::uint64_t ns);
  void evict_process();

  TableLimits limits_;
  std::map<std::uint32_t, ProcessRegions> procs_;
  std::uint64_t processes_evicted_ = 0;
};

}  // namespace loupe::jitregions

#endif  // LOUPE_JITREGIONS_REGION_TABLE_HPP
