// SPDX-License-Identifier: Apache-2.0
//
// Names of locks and frames of stacks, resolved as soon as the kernel first reports them
// (the first-seen ring, decoded on a core worker thread) while the waiting process still
// exists; collect() then reads the cache, and resolves late whatever the ring missed.
#ifndef LOUPE_LOCKWAIT_SYMBOL_CACHE_HPP
#define LOUPE_LOCKWAIT_SYMBOL_CACHE_HPP

#include <cstdint>
#include <map>
#include <mutex>
#include <string>
#include <tuple>
#include <vector>

#include "loupe/sdk/host.hpp"

namespace loupe::lockwait {

struct LockName {
  std::string symbol;  // empty when no symbol covers the address
  std::string module;
  std::uint64_t offset = 0;  // from the symbol's start
};

// Frames own their strings (the host's are valid until destroy(), but a copy keeps the
// cache independent of it).
struct CachedFrame {
  std::uint64_t address = 0;
  std::string symbol, module;
  std::uint64_t offset = 0;
  std::uint32_t kind = 0, resolution = 0;
};

class SymbolCache {
 public:
  // Kernel stack ids are in `stacks_fd` (a stack map of LW_STACK_DEPTH frames); user ones in
  // `user_stacks_fd`, `user_depth` frames each: the same map, or the in-kernel unwinder's
  // loupe_unwind_stacks with unwind = "tables" (LOUPE_UNWIND_MAX_DEPTH frames).
  SymbolCache(const sdk::Host& host, int stacks_fd, int user_stacks_fd, std::uint32_t user_depth)
      : host_(host),
        stacks_fd_(stacks_fd),
        user_stacks_fd_(user_stacks_fd),
        user_depth_(user_depth) {}

  // The ring's decoder (sdk::register_fixed_ring): one first-seen record.
  int decode(const void* data, std::uint32_t len);

  // tgid 0 = a kernel address.
  LockName lock_name(std::uint32_t tgid, std::uint64_t addr);
  // caller_ip != 0: inserted after the leaf unless the unwinder already has it.
  std::vector<CachedFrame> user_stack(std::uint32_t tgid, std::int32_t id,
                                      std::uint64_t caller_ip = 0);
  std::vector<CachedFrame> kernel_stack(std::int32_t id);
  // A user stack unwound in user space (unwind = "dwarf"), named now and kept under `id`
  // (an id the kernel's stack map never hands out) for user_stack().
  void put_user_stack(std::uint32_t tgid, std::int32_t id, const std::vector<std::uint64_t>& addrs);

  // Human label: symbol[+0xoff] or 0xaddr.
  static std::string label(const LockName& n, std::uint64_t addr);

 private:
  std::vector<CachedFrame> symbolize_frames(std::uint32_t pid, bool user, const std::uint64_t* ips,
                                            std::uint32_t n, bool* resolved_any);
  std::vector<CachedFrame> resolve_stack(std::uint32_t pid, std::int32_t id, bool user,
                                         std::uint64_t caller_ip);

  sdk::Host host_;
  int stacks_fd_;
  int user_stacks_fd_;
  std::uint32_t user_depth_;
  std::mutex mu_;
  std::map<std::pair<std::uint32_t, std::uint64_t>, LockName> locks_;
  // (pid or 0 for kernel, stack id)
  std::map<std::tuple<std::uint32_t, std::int32_t, std::uint64_t>, std::vector<CachedFrame>>
      stacks_;
};

}  // namespace loupe::lockwait

#endif  // LOUPE_LOCKWAIT_SYMBOL_CACHE_HPP
