// SPDX-License-Identifier: Apache-2.0
//
// Joins the per-site totals and the live allocations read from the BPF maps into one row
// per allocation site, and picks the sites worth reporting. No BPF here: unit-tested.
#ifndef LOUPE_MEMALLOC_SITE_TABLE_HPP
#define LOUPE_MEMALLOC_SITE_TABLE_HPP

#include <cstdint>
#include <map>
#include <tuple>
#include <vector>

#include "memalloc.h"

namespace loupe::memalloc {

struct SiteRow {
  ma_stack_key key{};
  std::uint64_t allocs = 0, bytes = 0, frees = 0, freed_bytes = 0;  // sampled, unscaled
  std::uint64_t outstanding = 0, outstanding_bytes = 0;
  std::uint64_t oldest_ns = 0;  // bpf_ktime_get_ns() of the oldest live allocation; 0 = none
  std::uint64_t old = 0, old_bytes = 0;  // live ones at least leak_age old (sampled)
};

class SiteTable {
 public:
  void add_site(const ma_stack_key& key, const ma_stack_stats& stats);
  // Allocations younger than `min_age_ns` at `now_ns` are not counted as outstanding.
  // Those at least `leak_age_ns` old are also counted in old/old_bytes (0: none are).
  void add_outstanding(const ma_alloc_info& info, std::uint64_t now_ns, std::uint64_t min_age_ns,
                       std::uint64_t leak_age_ns = 0);

  std::vector<SiteRow> rows() const;
  std::size_t size() const { return rows_.size(); }

  // The union of the `n` largest sites by bytes, by allocations and by outstanding
  // bytes, ordered by bytes (largest first); n == 0 keeps them all.
  static std::vector<SiteRow> top(std::vector<SiteRow> rows, std::size_t n);

 private:
  using Key = std::tuple<std::uint32_t, std::int32_t, std::int32_t, std::uint32_t>;
  static Key key_of(const ma_stack_key& k) {
    return {k.tgid, k.user_stack_id, k.kernel_stack_id, k.origin};
  }
  SiteRow& row(const ma_stack_key& key);
  std::map<Key, SiteRow> rows_;
};

}  // namespace loupe::memalloc

#endif  // LOUPE_MEMALLOC_SITE_TABLE_HPP
