// SPDX-License-Identifier: Apache-2.0
//
// unwind = "dwarf": futex waits arrive one by one with a copy of the waiting thread's
// stack (lw_dwarf_wait); each is unwound by the host, its stack named at once (the
// process is alive: it just waited) and interned under an id the kernel's stack map never
// hands out, and the wait lands in the (lock, thread, stack) row the fp mode keeps in the
// kernel. decode() runs on a core ring worker, rows() on the session thread.
#ifndef LOUPE_LOCKWAIT_DWARF_WAITS_HPP
#define LOUPE_LOCKWAIT_DWARF_WAITS_HPP

#include <cstdint>
#include <map>
#include <mutex>
#include <tuple>
#include <vector>

#include "lock_table.hpp"
#include "loupe/sdk/ustack.hpp"
#include "symbol_cache.hpp"

namespace loupe::lockwait {

class DwarfWaits {
 public:
  // At most `max_rows` (lock, thread, stack) rows, as max_waiters bounds the kernel's.
  DwarfWaits(const sdk::Host& host, SymbolCache& symbols, std::size_t max_rows);

  int decode(const void* data, std::uint32_t len);
  std::vector<WaiterRow> rows() const;
  // Waits whose row did not fit (counted, like the kernel's waiters_full).
  std::uint64_t rows_full() const;
  const sdk::UstackUnwinder& unwinder() const { return unwinder_; }

 private:
  using RowKey = std::tuple<std::uint32_t, std::uint32_t, std::uint64_t, std::int32_t>;

  sdk::UstackUnwinder unwinder_;
  SymbolCache& symbols_;
  std::size_t max_rows_;
  mutable std::mutex mu_;
  sdk::StackInterner stacks_;
  std::map<RowKey, lw_waiter_val> rows_;  // (tgid, tid, lock, stack id)
  std::uint64_t rows_full_ = 0;
  std::vector<std::uint64_t> addrs_;  // reused: one decode at a time
};

}  // namespace loupe::lockwait

#endif  // LOUPE_LOCKWAIT_DWARF_WAITS_HPP
