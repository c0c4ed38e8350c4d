// SPDX-License-Identifier: Apache-2.0
#include "dwarf_allocs.hpp"

#include <tuple>

namespace loupe::memalloc {

namespace {
ma_stack_key site_key(std::uint32_t tgid, std::int32_t id) {
  ma_stack_key k{};
  k.tgid = tgid;
  k.user_stack_id = id;
  k.kernel_stack_id = -1;
  k.origin = MA_ORIGIN_USER;
  return k;
}
}  // namespace

DwarfAllocs::DwarfAllocs(const sdk::Host& host, StackFrames& frames, std::size_t max_sites,
                         std::size_t max_live)
    : unwinder_(host, MA_STACK_DEPTH),
      frames_(frames),
      max_sites_(max_sites),
      max_live_(max_live) {}

int DwarfAllocs::decode(const void* data, std::uint32_t len) {
  if (len < sizeof(ma_dwarf_free)) return LOUPE_ERR_INVALID_ARG;
  const auto* h = static_cast<const ma_dwarf_free*>(data);
  if (len == sizeof(ma_dwarf_free)) {
    std::lock_guard lock(mu_);
    auto it = live_.find(h->seq);
    if (it == live_.end()) return LOUPE_OK;  // its allocation found no room: counted then
    auto s = sites_.find(it->second);
    if (s != sites_.end()) {
      s->second.frees++;
      s->second.freed_bytes += h->size;
    }
    live_.erase(it);
    return LOUPE_OK;
  }
  if (len < sizeof(ma_dwarf_alloc)) return LOUPE_ERR_INVALID_ARG;
  const auto* r = static_cast<const ma_dwarf_alloc*>(data);
  const std::uint32_t stack_len = len - static_cast<std::uint32_t>(sizeof(ma_dwarf_alloc));
  if (r->us.stack_len != stack_len) return LOUPE_ERR_INVALID_ARG;
  addrs_.clear();
  if (r->us.regs[LOUPE_USTACK_REG_SP]) unwinder_.unwind(h->tgid, r->us, r + 1, stack_len, addrs_);
  std::int32_t id = -1;
  bool fresh = false;
  if (!addrs_.empty()) std::tie(id, fresh) = stacks_.intern(h->tgid, addrs_);
  // Named outside the lock: the host's symbolizer takes its own.
  if (fresh) frames_.put_user_stack(h->tgid, id, addrs_);
  std::lock_guard lock(mu_);
  const SiteKey key{h->tgid, id};
  auto s = sites_.find(key);
  if (s == sites_.end()) {
    if (sites_.size() >= max_sites_) {
      ++full_;
      return LOUPE_OK;
    }
    s = sites_.emplace(key, ma_stack_stats{}).first;
  }
  s->second.allocs++;
  s->second.bytes += h->size;
  if (live_.size() >= max_live_) {
    ++full_;
    return LOUPE_OK;
  }
  live_[h->seq] = key;
  return LOUPE_OK;
}

std::vector<std::pair<ma_stack_key, ma_stack_stats>> DwarfAllocs::sites() const {
  std::lock_guard lock(mu_);
  std::vector<std::pair<ma_stack_key, ma_stack_stats>> out;
  out.reserve(sites_.size());
  for (const auto& [k, v] : sites_) out.emplace_back(site_key(k.first, k.second), v);
  return out;
}

bool DwarfAllocs::site_of(std::uint32_t seq, ma_stack_key* key) const {
  std::lock_guard lock(mu_);
  auto it = live_.find(seq);
  if (it == live_.end()) return false;
  *key = site_key(it->second.first, it->second.second);
  return true;
}

std::uint64_t DwarfAllocs::full() const {
  std::lock_guard lock(mu_);
  return full_;
}

}  // namespace loupe::memalloc
