// SPDX-License-Identifier: Apache-2.0
//
// Turns offcpu's kernel maps into records:
//   offcpu            stack records: time off the CPU (ns) and blocks per (process,
//                     thread?, stacks, reason); a flame graph of where threads waited.
//   offcpu_wakers     the same time with the waker's stack above a "--" frame
//                     (offwaketime's layout: wakee root..leaf, --, waker leaf..root).
//   offcpu_in_flight  final report: threads still off the CPU when the session ended,
//                     with the time so far (reported, not lost).
//   runq_latency      histograms: wake-up (or preemption) to running, per process and
//                     per CPU.
//   runq_blockers     stack records: the task that held the CPU while a woken thread of
//                     the target waited longer than runq_threshold_ns.
// Interval reports carry what changed since the last one; the final report the session
// (rotating sessions evict exited processes once a report carried their last counts, and
// the final report then holds the live ones: sdk/eviction.hpp).
// collect() runs on the session thread only.
#ifndef LOUPE_OFFCPU_REPORTER_HPP
#define LOUPE_OFFCPU_REPORTER_HPP

#include <cstdint>
#include <map>
#include <mutex>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "loupe/sdk/eviction.hpp"
#include "loupe/sdk/host.hpp"
#include "loupe/sdk/stack_map.hpp"
#include "loupe/sdk/thinning.hpp"
#include "offcpu.h"

namespace loupe::offcpu {

struct ReporterMaps {
  int stacks_fd = -1;
  int user_stacks_fd =
      -1;  // unwind = "tables": loupe_unwind_stacks; else user stacks are in stacks_fd
  int unwind_stats_fd = -1;  // unwind = "tables": loupe_unwind_stats
  int blocked_fd = -1;
  int offcpu_fd = -1;
  int runq_procs_fd = -1;
  int runq_cpus_fd = -1;
  int blockers_fd = -1;
  int counters_fd = -1;
  int user_slots_fd = -1;      // unwind = "tables": loupe_unwind_slots (user ids are freed there)
  int handover_lists_fd = -1;  // keys listed per process for the exit handover
  sdk::Thinning* thinning = nullptr;  // the plugin's; its skipped switch-outs are reported here
};

struct ReporterOptions {
  bool per_thread = false;
  bool wakers = true;
  bool run_queue = true;
  std::uint64_t runq_threshold_ns = 0;
  std::string mechanism;
  bool evict = false;  // rotating session: exited processes' keys (sdk/eviction.hpp)
};

const char* reason_name(std::uint32_t reason);

class OffcpuReporter {
 public:
  OffcpuReporter(const sdk::Host& host, ReporterMaps maps, ReporterOptions opts);

  void collect(bool is_final, std::uint64_t window_start_ns, std::uint64_t window_end_ns);
  // From stop(): the window reported after it is the session's last, and the final report
  // holds what it leaves, so what exited in it stays there too.
  void stop_evicting() { evict_now_ = false; }
  // A key the kernel took out of `offcpu` at its process's last switch, with its totals
  // (loupe/handover.bpf.h): reported from here as if read from the map. Any thread.
  void handed_over(const oc_key& key, const oc_val& value);

 private:
  using Frames = sdk::StackMapFrames::Frames;
  Frames stack_of(std::uint32_t tgid, std::int32_t user, std::int32_t kernel);
  // Interval reports: what grew since the last report under this key.
  std::uint64_t delta(const std::string& key, std::uint64_t total, bool is_final);
  void emit_offcpu(bool is_final);
  void emit_in_flight();
  void emit_runq(bool is_final);
  void emit_blockers(bool is_final);
  void emit_health(bool is_final);
  void evict(const std::set<std::uint32_t>& gone);
  int user_store_fd() const {
    return maps_.user_slots_fd >= 0 ? maps_.user_slots_fd : maps_.stacks_fd;
  }

  sdk::Host host_;
  ReporterMaps maps_;
  ReporterOptions opts_;
  sdk::StackMapFrames frames_;
  sdk::StackMapFrames user_frames_;
  // Erased with their keys (evicted, or handed over and reported), never by absence from a
  // read, and never lowered by a read: a key handed over between the map's read and its
  // record's arrival leaves its row short for one report, and must not be counted twice
  // when it comes back.
  sdk::PreviousTotals<std::uint64_t> previous_;
  sdk::PreviousTotals<oc_hist> previous_hist_;
  std::mutex handed_mu_;
  std::map<std::string, std::pair<oc_key, oc_val>> handed_;  // by key bytes; handed_mu_
  std::vector<std::pair<oc_key, oc_val>> handed_read_;       // the last report's
  // What the last report read, for eviction: only keys a report carried are deleted.
  struct ProcKey {
    std::uint32_t tgid;
    char comm[OC_COMM_LEN];
  };
  std::vector<std::pair<oc_key, oc_val>> read_keys_;
  std::vector<oc_blocker_key> read_blockers_;
  std::vector<ProcKey> read_procs_;
  std::set<std::uint32_t> tgids_read_;
  sdk::EvictionCounts evicted_;
  std::map<int, std::set<std::int32_t>> unreferenced_;  // by store fd: StackSweep::orphans
  bool evict_now_ = true;
  std::uint64_t ws_ = 0, we_ = 0;
  std::uint64_t session_start_ = 0;  // the first window's start: the counters' window
  std::uint64_t truncated_ = 0;      // blocks under stacks that filled their map (a total)
};

}  // namespace loupe::offcpu

#endif  // LOUPE_OFFCPU_REPORTER_HPP
