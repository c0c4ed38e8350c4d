// SPDX-License-Identifier: Apache-2.0
#include "symbol_cache.hpp"

#include <bpf/bpf.h>

#include <algorithm>
#include <cstdio>
#include <cstring>

#include "lockwait.h"
#include "loupe/unwind.h"

namespace loupe::lockwait {

int SymbolCache::decode(const void* data, std::uint32_t len) {
  if (len < sizeof(lw_first_seen_event)) return LOUPE_ERR_INVALID_ARG;
  lw_first_seen_event e{};
  std::memcpy(&e, data, sizeof(e));
  std::uint32_t pid = e.kind == LW_KIND_KERNEL ? 0 : e.tgid;
  lock_name(pid, e.addr);
  if (e.user_stack_id >= 0) user_stack(e.tgid, e.user_stack_id, e.caller_ip);
  if (e.kernel_stack_id >= 0) kernel_stack(e.kernel_stack_id);
  return LOUPE_OK;
}

LockName SymbolCache::lock_name(std::uint32_t tgid, std::uint64_t addr) {
  std::lock_guard lock(mu_);
  auto key = std::make_pair(tgid, addr);
  if (auto it = locks_.find(key); it != locks_.end()) return it->second;
  loupe_frame f{};
  LockName n;
  if (host_.symbolize_data(tgid, addr, &f)) {
    if (f.symbol) n.symbol = f.symbol;
    if (f.module) n.module = f.module;
    n.offset = f.offset;
  }
  // Cache failures too only when the process is known to be gone: a miss while it lives
  // may be a lock in memory mapped later, so it is retried.
  if (!n.symbol.empty() || f.resolution == LOUPE_UNRESOLVED_PROCESS_GONE || tgid == 0)
    locks_[key] = n;
  return n;
}

std::vector<CachedFrame> SymbolCache::user_stack(std::uint32_t tgid, std::int32_t id,
                                                 std::uint64_t caller_ip) {
  return resolve_stack(tgid, id, true, caller_ip);
}

std::vector<CachedFrame> SymbolCache::kernel_stack(std::int32_t id) {
  return resolve_stack(0, id, false, 0);
}

std::vector<CachedFrame> SymbolCache::resolve_stack(std::uint32_t pid, std::int32_t id, bool user,
                                                    std::uint64_t caller_ip) {
  if (id < 0) return {};
  std::lock_guard lock(mu_);
  auto key = std::make_tuple(user ? pid : 0u, id, caller_ip);
  if (auto it = stacks_.find(key); it != stacks_.end()) return it->second;
  // One more than the deepest stack: room for caller_ip.
  std::uint64_t ips[LOUPE_UNWIND_MAX_DEPTH + 1] = {};
  const std::uint32_t depth =
      std::min<std::uint32_t>(user ? user_depth_ : LW_STACK_DEPTH, LOUPE_UNWIND_MAX_DEPTH);
  if (bpf_map_lookup_elem(user ? user_stacks_fd_ : stacks_fd_, &id, ips) != 0) return {};
  std::uint32_t n = 0;
  while (n < depth && ips[n]) ++n;
  if (caller_ip && n >= 1 && (n == 1 || ips[1] != caller_ip)) {
    std::memmove(ips + 2, ips + 1, (n - 1) * sizeof(ips[0]));
    ips[1] = caller_ip;
    ++n;
  }
  bool resolved_any = false;
  std::vector<CachedFrame> out = symbolize_frames(pid, user, ips, n, &resolved_any);
  if (resolved_any || !user) stacks_[key] = out;
  return out;
}

std::vector<CachedFrame> SymbolCache::symbolize_frames(std::uint32_t pid, bool user,
                                                       const std::uint64_t* ips, std::uint32_t n,
                                                       bool* resolved_any) {
  std::vector<loupe_frame> frames(n);
  host_.symbolize(user ? pid : 0, user ? LOUPE_FRAME_USER : LOUPE_FRAME_KERNEL, ips, n,
                  frames.data());
  std::vector<CachedFrame> out(n);
  for (std::uint32_t i = 0; i < n; ++i) {
    out[i].address = ips[i];
    out[i].symbol = frames[i].symbol ? frames[i].symbol : "";
    out[i].module = frames[i].module ? frames[i].module : "";
    out[i].offset = frames[i].offset;
    out[i].kind = user ? LOUPE_FRAME_USER : LOUPE_FRAME_KERNEL;
    out[i].resolution = frames[i].resolution;
    *resolved_any |= !out[i].symbol.empty();
  }
  return out;
}

void SymbolCache::put_user_stack(std::uint32_t tgid, std::int32_t id,
                                 const std::vector<std::uint64_t>& addrs) {
  const auto n = static_cast<std::uint32_t>(std::min<std::size_t>(addrs.size(), LW_STACK_DEPTH));
  bool resolved_any = false;
  std::vector<CachedFrame> out = symbolize_frames(tgid, true, addrs.data(), n, &resolved_any);
  std::lock_guard lock(mu_);
  stacks_[std::make_tuple(tgid, id, std::uint64_t{0})] = std::move(out);
}

std::string SymbolCache::label(const LockName& n, std::uint64_t addr) {
  char buf[32];
  if (n.symbol.empty()) {
    std::snprintf(buf, sizeof(buf), "0x%llx", static_cast<unsigned long long>(addr));
    return buf;
  }
  if (n.offset == 0) return n.symbol;
  std::snprintf(buf, sizeof(buf), "+0x%llx", static_cast<unsigned long long>(n.offset));
  return n.symbol + buf;
}

}  // namespace loupe::lockwait
