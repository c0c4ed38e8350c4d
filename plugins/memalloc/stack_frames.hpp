// SPDX-License-Identifier: Apache-2.0
//
// Reads stacks from the BPF stack maps and symbolizes them through the host, caching the
// frames of each (process, stack id): a stack id names one stack for the session.
#ifndef LOUPE_MEMALLOC_STACK_FRAMES_HPP
#define LOUPE_MEMALLOC_STACK_FRAMES_HPP

#include <cstdint>
#include <map>
#include <mutex>
#include <tuple>
#include <vector>

#include "loupe/sdk/host.hpp"
#include "loupe/sdk/stack_map.hpp"
#include "memalloc.h"

namespace loupe::memalloc {

class StackFrames {
 public:
  // User stack ids live in `user_stacks_fd` (the unwinder's loupe_unwind_stacks with unwind =
  // "tables", same value layout), kernel ones in `stacks_fd`; one map serves both otherwise.
  StackFrames(const sdk::Host& host, int stacks_fd, int user_stacks_fd)
      : host_(host),
        kernel_map_(host, stacks_fd, MA_STACK_DEPTH),
        user_map_(host, user_stacks_fd, MA_STACK_DEPTH) {}

  // Kernel frames (leaf first, without the tracing machinery's: see
  // sdk::StackMapFrames::kernel()), then user frames; an unavailable half is left out.
  // Valid until forget_frames().
  const std::vector<loupe_frame>& frames(const ma_stack_key& key);
  // Drops the named stacks once a report is out: a report names only the sites that
  // changed (the final one all of them, once), and the names of every site of every
  // process a run saw, kept, grew the RSS of a soak of short-lived processes by megabytes.
  // The host keeps the processes' symbols, so naming a stack again is cheap.
  void forget_frames() {
    std::lock_guard lock(mu_);
    cache_.clear();
  }

  // Has the host read `tgid`'s address space and the symbols of each executable mapping
  // now, so its stacks can be symbolized after it exits. Called periodically for each
  // traced process; reads /proc/PID/maps and does more only when the mappings changed.
  void warm(std::uint32_t tgid);

  // A user stack unwound in user space (unwind = "dwarf"), kept under `id` (an id the
  // kernel's stack map never hands out) and named now, while its process lives.
  void put_user_stack(std::uint32_t tgid, std::int32_t id, const std::vector<std::uint64_t>& addrs);

 private:
  void append(std::uint32_t pid, loupe_frame_kind kind, std::int32_t id,
              std::vector<loupe_frame>& out) const;

  const sdk::Host& host_;
  // Readers of the two maps only: this class keeps its own cache, which forget_frames()
  // empties, where StackMapFrames keeps every stack for the session.
  sdk::StackMapFrames kernel_map_;
  sdk::StackMapFrames user_map_;
  std::mutex mu_;  // collect() and the warm-up thread
  std::map<std::tuple<std::uint32_t, std::int32_t, std::int32_t>, std::vector<loupe_frame>> cache_;
  std::map<std::uint32_t, std::vector<std::uint64_t>> warmed_;  // executable mappings seen
  std::map<std::pair<std::uint32_t, std::int32_t>, std::vector<std::uint64_t>> unwound_;
};

}  // namespace loupe::memalloc

#endif  // LOUPE_MEMALLOC_STACK_FRAMES_HPP
