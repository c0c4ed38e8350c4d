// SPDX-License-Identifier: Apache-2.0
//
// collect(): reads the lock, waiter and counter maps, sweeps stale in-flight waits, and
// emits per lock (top N by total wait) a HISTOGRAM, METRICs, a summary EVENT with the
// convoy/long-hold hint and the per-thread breakdown; per (lock, stack) a STACK_SAMPLE
// (values wait_ns, waits) for flame graphs; and HEALTH for every loss. Reports are
// cumulative since start (the folded sink folds only the final one).
#ifndef LOUPE_LOCKWAIT_LOCK_REPORTER_HPP
#define LOUPE_LOCKWAIT_LOCK_REPORTER_HPP

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "lock_table.hpp"
#include "lockwait.h"
#include "loupe/sdk/host.hpp"
#include "symbol_cache.hpp"

namespace loupe::lockwait {

struct ReporterMaps {
  int inflight_fd = -1;
  int locks_fd = -1;
  int waiters_fd = -1;
  int counters_fd = -1;
  int holders_fd = -1;
};

// Filled from the config by setup(): the schema's defaults are the only ones.
struct ReporterOptions {
  std::uint32_t top = 0;
  std::uint32_t stacks_per_lock = 0;
  std::uint32_t threads_per_lock = 0;
  std::uint64_t max_age_ns = 0;
  bool futex = false, kernel = false, pthread_stacks = false, holders = false;
  std::string kernel_mechanism;  // "tp_btf" or "tracepoint"
};

class LockReporter {
 public:
  LockReporter(const sdk::Host& host, ReporterMaps maps, ReporterOptions opts,
               SymbolCache& symbols);

  void collect(bool is_final, std::uint64_t window_start_ns, std::uint64_t window_end_ns);
  // Rows kept in user space (unwind = "dwarf"), folded in with the kernel's.
  void set_extra_waiters(std::function<std::vector<WaiterRow>()> rows) {
    extra_waiters_ = std::move(rows);
  }

 private:
  std::vector<std::uint64_t> read_counters() const;
  std::uint64_t sweep_inflight();
  void emit_finding(std::uint32_t rank, const LockSummary& s, const std::string& label,
                    const std::string& type, double window_s);
  void emit_lock(std::uint32_t rank, const LockSummary& s, double window_s);
  void emit_stacks(const LockSummary& s, const std::string& lock_label);
  // holders: per lock, the releasers' stacks with the wait time their wakes ended.
  void emit_holders(const LockSummary& s, const std::string& lock_label);
  std::vector<std::pair<lw_holder_key, lw_holder_val>> holders_;  // this collect's
  void emit_counters(const std::vector<std::uint64_t>& c);

  sdk::Host host_;
  ReporterMaps maps_;
  ReporterOptions opts_;
  SymbolCache& symbols_;
  std::function<std::vector<WaiterRow>()> extra_waiters_;
  std::uint64_t expired_swept_ = 0;
  std::uint64_t first_window_start_ = 0;
  bool is_final_ = false;
  std::uint64_t window_start_ = 0, window_end_ = 0;
};

}  // namespace loupe::lockwait

#endif  // LOUPE_LOCKWAIT_LOCK_REPORTER_HPP
