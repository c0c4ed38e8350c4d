// SPDX-License-Identifier: Apache-2.0
#include "lock_table.hpp"

#include "loupe/sdk/hist_slots.hpp"

#include <algorithm>
#include <cstring>
#include <map>
#include <tuple>

namespace loupe::lockwait {
namespace {

using LockId = std::tuple<std::uint32_t, std::uint32_t, std::uint64_t>;  // tgid, kind, addr

LockId id_of(const lw_lock_key& k) {
  return {k.tgid, k.kind, k.addr};
}

template <typename T>
void by_total_desc(std::vector<T>& v) {
  std::sort(v.begin(), v.end(), [](const T& a, const T& b) {
    return a.total_ns != b.total_ns ? a.total_ns > b.total_ns : a.waits > b.waits;
  });
}

}  // namespace

std::vector<LockSummary> build_lock_table(const std::vector<LockRow>& locks,
                                          const std::vector<WaiterRow>& waiters) {
  std::map<LockId, LockSummary> table;
  for (const auto& [k, v] : locks) {
    auto& s = table[id_of(k)];
    s.key = k;
    s.val = v;
  }
  struct Acc {
    std::map<std::uint32_t, ThreadWait> threads;
    std::map<std::tuple<std::int32_t, std::int32_t, std::uint64_t>, StackWait> stacks;
    std::map<std::tuple<std::int32_t, std::int32_t, std::uint64_t>, std::uint64_t> stack_comm_share;
  };
  std::map<LockId, Acc> acc;
  for (const auto& [k, v] : waiters) {
    lw_lock_key lk{};
    lk.tgid = k.tgid;
    lk.kind = k.kind;
    lk.addr = k.addr;
    LockId id = id_of(lk);
    // A waiter row without its lock row: the lock map was full. Keep it visible.
    if (!table.count(id)) {
      auto& s = table[id];
      s.key = lk;
    }
    auto& a = acc[id];
    auto& t = a.threads[k.tid];
    t.tid = k.tid;
    t.comm.assign(v.comm, strnlen(v.comm, sizeof(v.comm)));
    t.waits += v.waits;
    t.total_ns += v.total_ns;
    t.max_ns = std::max(t.max_ns, static_cast<std::uint64_t>(v.max_ns));
    if (v.first_ns && (!t.first_ns || v.first_ns < t.first_ns)) t.first_ns = v.first_ns;
    t.last_ns = std::max(t.last_ns, static_cast<std::uint64_t>(v.last_ns));
    auto sk = std::make_tuple(k.user_stack_id, k.kernel_stack_id,
                              static_cast<std::uint64_t>(k.caller_ip));
    auto& st = a.stacks[sk];
    st.user_stack_id = k.user_stack_id;
    st.kernel_stack_id = k.kernel_stack_id;
    st.caller_ip = k.caller_ip;
    st.waits += v.waits;
    st.total_ns += v.total_ns;
    st.max_ns = std::max(st.max_ns, static_cast<std::uint64_t>(v.max_ns));
    if (v.total_ns >= a.stack_comm_share[sk]) {
      a.stack_comm_share[sk] = v.total_ns;
      st.comm = t.comm;
    }
  }
  std::vector<LockSummary> out;
  out.reserve(table.size());
  for (auto& [id, s] : table) {
    auto it = acc.find(id);
    if (it != acc.end()) {
      for (auto& [tid, t] : it->second.threads) s.threads.push_back(std::move(t));
      for (auto& [sk, st] : it->second.stacks) s.stacks.push_back(std::move(st));
      // Rows whose lock entry was refused: the waiter rows are all there is.
      if (s.val.waits == 0)
        for (const auto& t : s.threads) {
          s.val.waits += t.waits;
          s.val.total_ns += t.total_ns;
          s.val.max_ns = std::max(s.val.max_ns, static_cast<__u64>(t.max_ns));
        }
    }
    by_total_desc(s.threads);
    by_total_desc(s.stacks);
    out.push_back(std::move(s));
  }
  std::sort(out.begin(), out.end(), [](const LockSummary& a, const LockSummary& b) {
    if (a.val.total_ns != b.val.total_ns) return a.val.total_ns > b.val.total_ns;
    if (a.val.waits != b.val.waits) return a.val.waits > b.val.waits;
    return a.key.addr < b.key.addr;
  });
  return out;
}

std::uint64_t hist_p50(const lw_lock_val& v) {
  std::uint64_t n = 0;
  for (auto c : v.slots) n += c;
  if (n == 0) return 0;
  std::uint64_t seen = 0, rank = (n + 1) / 2;
  for (std::uint32_t i = 0; i < LW_HIST_SLOTS; ++i) {
    seen += v.slots[i];
    if (seen < rank) continue;
    sdk::SlotBounds b = sdk::log2_slot_bounds(i, LW_HIST_SLOTS);
    std::uint64_t hi = b.upper == UINT64_MAX ? v.max_ns : b.upper;
    std::uint64_t mid = b.lower + (hi - b.lower) / 2;
    if (v.max_ns && mid > v.max_ns) mid = v.max_ns;
    if (mid < v.min_ns) mid = v.min_ns;
    return mid;
  }
  return v.max_ns;
}

std::string lock_type(std::uint32_t kind, std::uint32_t flags) {
  if (kind == LW_KIND_FUTEX) return "futex";
  // Same decoding as perf lock contention (tools/perf/builtin-lock.c, get_type_str).
  // Flags are OR'd over a lock's waits: readers and writers both waited -> no suffix.
  bool r = flags & LW_LCB_READ, w = flags & LW_LCB_WRITE;
  std::string rw = r && w ? "" : r ? ":read" : w ? ":write" : "";
  if (r && w && !(flags & (LW_LCB_PERCPU | LW_LCB_SPIN))) return "rwsem";
  if (flags & LW_LCB_PERCPU) return "percpu-rwsem" + rw;
  if (flags & LW_LCB_RT) return "rtmutex";
  if (flags & LW_LCB_MUTEX) return "mutex";
  if (flags & LW_LCB_SPIN) return rw.empty() ? "spinlock" : "rwlock" + rw;
  if (!rw.empty()) return "rwsem" + rw;
  return flags ? "other" : "unknown";
}

}  // namespace loupe::lockwait
