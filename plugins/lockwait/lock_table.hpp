// SPDX-License-Identifier: Apache-2.0
//
// The kernel's per-lock and per-(lock, thread, stack) rows folded into one summary per
// lock, ranked by total wait. Pure: takes rows, no maps, so it is unit-tested on values.
#ifndef LOUPE_LOCKWAIT_LOCK_TABLE_HPP
#define LOUPE_LOCKWAIT_LOCK_TABLE_HPP

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "lockwait.h"

namespace loupe::lockwait {

struct ThreadWait {
  std::uint32_t tid = 0;
  std::string comm;
  std::uint64_t waits = 0, total_ns = 0, max_ns = 0;
  std::uint64_t first_ns = 0, last_ns = 0;  // its first wait's start, its last wait's end
};

struct StackWait {
  std::int32_t user_stack_id = -1;
  std::int32_t kernel_stack_id = -1;
  std::uint64_t caller_ip = 0;  // pthread_stacks: the direct caller, spliced in as frame 1
  std::uint64_t waits = 0, total_ns = 0, max_ns = 0;
  std::string comm;  // of the thread with the largest share (for flame-graph roots)
};

struct LockSummary {
  lw_lock_key key{};
  lw_lock_val val{};
  std::vector<ThreadWait> threads;  // by total wait, descending
  std::vector<StackWait> stacks;    // by total wait, descending
};

using LockRow = std::pair<lw_lock_key, lw_lock_val>;
using WaiterRow = std::pair<lw_waiter_key, lw_waiter_val>;

// Locks ranked by total wait (ties: more waits first, then address).
std::vector<LockSummary> build_lock_table(const std::vector<LockRow>& locks,
                                          const std::vector<WaiterRow>& waiters);

// Median estimate from log2 slots: the midpoint of the bucket holding the middle wait,
// clamped to [min, max].
std::uint64_t hist_p50(const lw_lock_val& v);

// "spin", "mutex", "rwsem:read", "rwlock:write", "rtmutex", "percpu-rwsem", ... from the
// LCB_F_* flags of lock:contention_begin; "futex" for user-space waits.
std::string lock_type(std::uint32_t kind, std::uint32_t flags);

}  // namespace loupe::lockwait

#endif  // LOUPE_LOCKWAIT_LOCK_TABLE_HPP
