// SPDX-License-Identifier: Apache-2.0
//
// Turns the in-kernel sample counts into records: one stack-sample record per (process,
// thread?, comm, user stack, kernel stack) with its sample count, plus totals and health
// (stack failures, truncated stacks, aggregation map full).
//
// Stacks are symbolized once and cached. warm() symbolizes new stacks while their process
// still runs (a process that exits before the final report could not be read any more);
// the plugin calls it from its own thread. warm() and collect() may run concurrently.
//
// unwind = "dwarf": samples arrive one by one (add_dwarf_sample, from the ring worker)
// with user stacks already unwound; they are symbolized at first sight (their process is
// running) and counted here under the same kind of key, so both modes report alike.
//
// A process's keys also leave the map at its exit, handed over by the kernel with their
// totals (loupe/handover.bpf.h, handed_over() on the ring worker): they are reported from
// here as if read from the map, so the map's room follows the live processes even when
// reports are far apart or this thread is starved.
//
// Rotating sessions evict the keys, stacks and cached frames of exited processes once an
// interval report has carried their last counts (sdk/eviction.hpp); handed-over keys go
// with the first report that carries them.
#ifndef LOUPE_CPUSAMPLE_STACK_REPORTER_HPP
#define LOUPE_CPUSAMPLE_STACK_REPORTER_HPP

#include <array>
#include <compare>
#include <cstdint>
#include <functional>
#include <map>
#include <mutex>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "cpusample.h"
#include "loupe/sdk/eviction.hpp"
#include "loupe/sdk/host.hpp"
#include "loupe/sdk/stack_map.hpp"
#include "loupe/sdk/thinning.hpp"

namespace loupe::cpusample {

struct ReporterMaps {
  int counts_fd = -1;
  int stacks_fd = -1;
  int counters_fd = -1;
  int user_stacks_fd = -1;     // unwind = "tables": loupe_unwind_stacks; else in stacks_fd
  int unwind_stats_fd = -1;    // unwind = "tables": loupe_unwind_stats
  int user_slots_fd = -1;      // unwind = "tables": loupe_unwind_slots (user ids are freed there)
  int handover_lists_fd = -1;  // keys listed per process for the exit handover, or -1
  sdk::Thinning* thinning = nullptr;  // the plugin's; its skipped samples are reported here
};

struct ReporterOptions {
  bool per_thread = false;
  std::size_t max_keys = 16384;    // dwarf mode: distinct (process, stacks) counted
  std::size_t max_stacks = 16384;  // dwarf mode: distinct user stacks kept
  std::string record_name = "cpu";
  std::uint64_t sample_ns = 0;  // CPU time one sample stands for: records' time_ns value
  bool evict = false;           // rotating session: exited processes' keys (sdk/eviction.hpp)
  bool evict_now = true;        // false once stopped
};

class StackReporter {
 public:
  StackReporter(const sdk::Host& host, ReporterMaps maps, ReporterOptions opts);

  void warm();
  // From stop(): the window reported after it is the session's last, and the final report
  // holds what it leaves, so what exited in it stays there too.
  void stop_evicting() {
    std::lock_guard lock(mu_);
    opts_.evict_now = false;
  }
  void collect(bool is_final, std::uint64_t window_start_ns, std::uint64_t window_end_ns);

  // dwarf mode: one sample with its unwound user stack (`user` empty: none) and its
  // kernel stack id. Any thread.
  void add_dwarf_sample(const cs_dwarf_rec& rec, const std::vector<std::uint64_t>& user);
  // A key the kernel took out of the map at its process's exit, with its total. Any thread.
  void handed_over(const cs_key& key, std::uint64_t total);
  // Extra health of the dwarf path (rows appended to the fp path's), set by the plugin.
  void set_dwarf_health(std::function<void(bool, std::uint64_t, std::uint64_t)> fn) {
    dwarf_health_ = std::move(fn);
  }

 private:
  using Frames = sdk::StackMapFrames::Frames;
  struct DwarfKey {
    std::uint32_t tgid;
    std::uint32_t pid;
    std::int32_t kernel_stack_id;
    std::uint32_t user_stack;  // index in dwarf_frames_; kNoStack when none
    std::array<char, CS_COMM_LEN> comm;
    auto operator<=>(const DwarfKey&) const = default;
  };
  static constexpr std::uint32_t kNoStack = 0xffffffffu;
  void emit_stack(std::uint32_t tgid, std::uint32_t tid, const char* comm, std::size_t comm_len,
                  const std::string& key_bytes, std::uint64_t total, const Frames* kernel,
                  const Frames* user, bool cut, bool is_final, std::uint64_t ws, std::uint64_t we,
                  std::uint64_t* truncated);
  std::vector<std::pair<cs_key, std::uint64_t>> read_counts() const;
  cs_counters read_counters() const;
  void emit_health(const cs_counters& c, std::uint64_t truncated, bool is_final, std::uint64_t ws,
                   std::uint64_t we);
  void evict(const std::vector<std::pair<cs_key, std::uint64_t>>& counts,
             const std::vector<std::pair<cs_key, std::uint64_t>>& handed,
             const std::set<std::uint32_t>& gone);
  int user_store_fd() const {
    return maps_.user_slots_fd >= 0 ? maps_.user_slots_fd : maps_.stacks_fd;
  }

  sdk::Host host_;
  ReporterMaps maps_;
  ReporterOptions opts_;
  std::mutex mu_;
  sdk::StackMapFrames frames_;       // fp mode's stack ids; guarded by mu_
  sdk::StackMapFrames user_frames_;  // user stack ids (tables or fp); mu_
  // key bytes -> count at the last interval; erased with the key (evicted, or handed over
  // and reported), never by absence from a read: a key handed over between the map's read
  // and its record's arrival keeps its total, so its record adds only what is new.
  sdk::PreviousTotals<std::uint64_t> previous_;
  std::map<std::string, std::pair<cs_key, std::uint64_t>> handed_;  // by key bytes; mu_
  // dwarf mode
  std::map<DwarfKey, std::uint64_t> dwarf_counts_;
  std::map<std::pair<std::uint32_t, std::vector<std::uint64_t>>, std::uint32_t> dwarf_index_;
  std::map<std::uint32_t, Frames> dwarf_frames_;  // by the index dwarf_index_ hands out
  std::set<std::uint32_t> dwarf_depth_;           // dwarf_frames_ cut at CS_MAX_STACK_DEPTH
  std::uint32_t next_dwarf_stack_ = 0;
  // eviction (rotating sessions)
  std::set<std::uint32_t> tgids_read_;  // the processes of the last read
  sdk::EvictionCounts evicted_;
  std::map<int, std::set<std::int32_t>> unreferenced_;  // by store fd: StackSweep::orphans
  std::uint64_t session_start_ = 0;  // the first window's start: the counters' window
  std::uint64_t dwarf_keys_full_ = 0;
  std::uint64_t dwarf_stacks_full_ = 0;
  std::function<void(bool, std::uint64_t, std::uint64_t)> dwarf_health_;
};

}  // namespace loupe::cpusample

#endif  // LOUPE_CPUSAMPLE_STACK_REPORTER_HPP
