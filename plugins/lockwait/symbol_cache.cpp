// SPDX-License-Identifier: Apache-2.0
#include "symbol_cache.hpp"

#include <algorithm>
#include <cstdio>
#include <cstring>

#include "lockwait.h"

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

SymbolCache::SymbolCache(const sdk::Host& host, int stacks_fd, int user_stacks_fd,
                         std::uint32_t user_depth)
    : host_(host),
      kernel_frames_(host, stacks_fd, LW_STACK_DEPTH),
      user_frames_(host, user_stacks_fd, user_depth) {}

SymbolCache::Frames SymbolCache::user_stack(std::uint32_t tgid, std::int32_t id,
                                            std::uint64_t caller_ip) {
  std::lock_guard lock(mu_);
  Frames out = user_frames_.user(tgid, id);
  // pthread_stacks: the return address the uprobe read at pthread_*lock's entry, which the
  // frame-pointer walk skips (the libc leaf resumes at its caller's caller).
  if (caller_ip && !out.empty() && (out.size() == 1 || out[1].address != caller_ip)) {
    auto [it, inserted] = callers_.try_emplace({tgid, caller_ip});
    if (inserted) host_.symbolize(tgid, LOUPE_FRAME_USER, &caller_ip, 1, &it->second);
    out.insert(out.begin() + 1, it->second);
  }
  return out;
}

SymbolCache::Frames SymbolCache::kernel_stack(std::int32_t id) {
  std::lock_guard lock(mu_);
  return kernel_frames_.kernel(id);
}

void SymbolCache::put_user_stack(std::uint32_t tgid, std::int32_t id,
                                 const std::vector<std::uint64_t>& addrs) {
  const std::vector<std::uint64_t> ips(
      addrs.begin(), addrs.begin() + static_cast<std::ptrdiff_t>(
                                         std::min<std::size_t>(addrs.size(), LW_STACK_DEPTH)));
  std::lock_guard lock(mu_);
  user_frames_.put_user(tgid, id, ips);
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
