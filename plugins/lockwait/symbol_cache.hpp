// SPDX-License-Identifier: Apache-2.0
//
// Names of locks and frames of stacks, resolved as soon as the kernel first reports them
// (the first-seen ring, decoded on a core worker thread) while the waiting process still
// exists; collect() then reads the cache, and resolves late whatever the ring missed.
// Stack frames come from sdk::StackMapFrames, like every profiler's; this class adds the
// lock names, the lock both threads take, and pthread_stacks' caller frame.
#ifndef LOUPE_LOCKWAIT_SYMBOL_CACHE_HPP
#define LOUPE_LOCKWAIT_SYMBOL_CACHE_HPP

#include <cstdint>
#include <map>
#include <mutex>
#include <string>
#include <vector>

#include "loupe/sdk/host.hpp"
#include "loupe/sdk/stack_map.hpp"

namespace loupe::lockwait {

struct LockName {
  std::string symbol;  // empty when no symbol covers the address
  std::string module;
  std::uint64_t offset = 0;  // from the symbol's start
};

class SymbolCache {
 public:
  using Frames = sdk::StackMapFrames::Frames;  // strings are the host's, valid until destroy()

  // Kernel stack ids are in `stacks_fd` (a stack map of LW_STACK_DEPTH frames); user ones in
  // `user_stacks_fd`, `user_depth` frames each: the same map, or the in-kernel unwinder's
  // loupe_unwind_stacks with unwind = "tables" (LOUPE_UNWIND_MAX_DEPTH frames).
  SymbolCache(const sdk::Host& host, int stacks_fd, int user_stacks_fd, std::uint32_t user_depth);

  // The ring's decoder (sdk::register_fixed_ring): one first-seen record.
  int decode(const void* data, std::uint32_t len);

  // tgid 0 = a kernel address.
  LockName lock_name(std::uint32_t tgid, std::uint64_t addr);
  // caller_ip != 0: inserted after the leaf unless the unwinder already has it.
  Frames user_stack(std::uint32_t tgid, std::int32_t id, std::uint64_t caller_ip = 0);
  Frames kernel_stack(std::int32_t id);
  // A user stack unwound in user space (unwind = "dwarf"), named now and kept under `id`
  // (an id the kernel's stack map never hands out) for user_stack().
  void put_user_stack(std::uint32_t tgid, std::int32_t id, const std::vector<std::uint64_t>& addrs);

  // Before the final report: stacks still unnamed are named again at once.
  void rename_unnamed_now() {
    std::lock_guard lock(mu_);
    user_frames_.rename_unnamed_now();
  }

  // Human label: symbol[+0xoff] or 0xaddr.
  static std::string label(const LockName& n, std::uint64_t addr);

 private:
  sdk::Host host_;
  std::mutex mu_;  // the ring's worker thread and collect()
  sdk::StackMapFrames kernel_frames_;
  sdk::StackMapFrames user_frames_;
  std::map<std::pair<std::uint32_t, std::uint64_t>, LockName> locks_;
  std::map<std::pair<std::uint32_t, std::uint64_t>, loupe_frame> callers_;  // (tgid, caller_ip)
};

}  // namespace loupe::lockwait

#endif  // LOUPE_LOCKWAIT_SYMBOL_CACHE_HPP
