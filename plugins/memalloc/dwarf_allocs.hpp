// SPDX-License-Identifier: Apache-2.0
//
// unwind = "dwarf": the sampled user allocations arrive with a copy of their caller's
// stack (ma_dwarf_alloc), their frees as the allocation's sequence number
// (ma_dwarf_free), in order on one ring. Each stack is unwound by the host, named at once
// (the process is alive: it just allocated) and interned under an id the kernel's stack
// map never hands out; the per-site totals the fp mode keeps in the kernel are kept here,
// and a live allocation's site is found from its sequence number at collect.
// decode() runs on a core ring worker; the rest on the session thread.
#ifndef LOUPE_MEMALLOC_DWARF_ALLOCS_HPP
#define LOUPE_MEMALLOC_DWARF_ALLOCS_HPP

#include <cstdint>
#include <map>
#include <mutex>
#include <unordered_map>
#include <utility>
#include <vector>

#include "loupe/sdk/ustack.hpp"
#include "memalloc.h"
#include "stack_frames.hpp"

namespace loupe::memalloc {

class DwarfAllocs {
 public:
  // At most `max_sites` sites (as max_sites bounds the kernel's) and `max_live` live
  // allocations remembered (as max_outstanding bounds the kernel's).
  DwarfAllocs(const sdk::Host& host, StackFrames& frames, std::size_t max_sites,
              std::size_t max_live);

  int decode(const void* data, std::uint32_t len);

  std::vector<std::pair<ma_stack_key, ma_stack_stats>> sites() const;
  // The site of live allocation `seq`; false when it is not known (its record was lost).
  bool site_of(std::uint32_t seq, ma_stack_key* key) const;
  // Allocations that found no room (site table or live table full): counted only.
  std::uint64_t full() const;
  const sdk::UstackUnwinder& unwinder() const { return unwinder_; }

 private:
  using SiteKey = std::pair<std::uint32_t, std::int32_t>;  // (tgid, stack id)

  sdk::UstackUnwinder unwinder_;
  StackFrames& frames_;
  std::size_t max_sites_, max_live_;
  mutable std::mutex mu_;
  sdk::StackInterner stacks_;
  std::map<SiteKey, ma_stack_stats> sites_;
  std::unordered_map<std::uint32_t, SiteKey> live_;  // seq -> site
  std::uint64_t full_ = 0;
  std::vector<std::uint64_t> addrs_;  // reused: one decode at a time
};

}  // namespace loupe::memalloc

#endif  // LOUPE_MEMALLOC_DWARF_ALLOCS_HPP
