// SPDX-License-Identifier: Apache-2.0
#include "dwarf_waits.hpp"

#include <algorithm>
#include <cstring>
#include <tuple>

namespace loupe::lockwait {

DwarfWaits::DwarfWaits(const sdk::Host& host, SymbolCache& symbols, std::size_t max_rows)
    : unwinder_(host, LW_STACK_DEPTH), symbols_(symbols), max_rows_(max_rows) {}

int DwarfWaits::decode(const void* data, std::uint32_t len) {
  if (len < sizeof(lw_dwarf_wait)) return LOUPE_ERR_INVALID_ARG;
  const auto* r = static_cast<const lw_dwarf_wait*>(data);
  const std::uint32_t stack_len = len - static_cast<std::uint32_t>(sizeof(lw_dwarf_wait));
  if (r->us.stack_len != stack_len) return LOUPE_ERR_INVALID_ARG;
  addrs_.clear();
  if (r->us.regs[LOUPE_USTACK_REG_SP]) unwinder_.unwind(r->tgid, r->us, r + 1, stack_len, addrs_);
  std::int32_t id = -1;
  bool fresh = false;
  if (!addrs_.empty()) std::tie(id, fresh) = stacks_.intern(r->tgid, addrs_);
  // Named outside the lock: the host's symbolizer takes its own.
  if (fresh) symbols_.put_user_stack(r->tgid, id, addrs_);
  std::lock_guard lock(mu_);
  const RowKey key{r->tgid, r->tid, r->addr, id};
  auto it = rows_.find(key);
  if (it == rows_.end()) {
    if (rows_.size() >= max_rows_) {
      ++rows_full_;
      return LOUPE_OK;
    }
    lw_waiter_val v{};
    std::memcpy(v.comm, r->comm, sizeof(v.comm));
    v.first_ns = r->end_ns - r->delta_ns;
    it = rows_.emplace(key, v).first;
  }
  it->second.last_ns = r->end_ns;
  it->second.waits++;
  it->second.total_ns += r->delta_ns;
  it->second.max_ns = std::max<std::uint64_t>(it->second.max_ns, r->delta_ns);
  return LOUPE_OK;
}

std::vector<WaiterRow> DwarfWaits::rows() const {
  std::lock_guard lock(mu_);
  std::vector<WaiterRow> out;
  out.reserve(rows_.size());
  for (const auto& [k, v] : rows_) {
    lw_waiter_key key{};
    key.tgid = std::get<0>(k);
    key.tid = std::get<1>(k);
    key.addr = std::get<2>(k);
    key.kind = LW_KIND_FUTEX;
    key.user_stack_id = std::get<3>(k);
    key.kernel_stack_id = -1;
    out.emplace_back(key, v);
  }
  return out;
}

std::uint64_t DwarfWaits::rows_full() const {
  std::lock_guard lock(mu_);
  return rows_full_;
}

}  // namespace loupe::lockwait
