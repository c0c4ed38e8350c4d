// SPDX-License-Identifier: Apache-2.0
#include "site_table.hpp"

#include <algorithm>
#include <set>

namespace loupe::memalloc {

SiteRow& SiteTable::row(const ma_stack_key& key) {
  auto [it, inserted] = rows_.try_emplace(key_of(key));
  if (inserted) it->second.key = key;
  return it->second;
}

void SiteTable::add_site(const ma_stack_key& key, const ma_stack_stats& stats) {
  SiteRow& r = row(key);
  r.allocs += stats.allocs;
  r.bytes += stats.bytes;
  r.frees += stats.frees;
  r.freed_bytes += stats.freed_bytes;
}

void SiteTable::add_outstanding(const ma_alloc_info& info, std::uint64_t now_ns,
                                std::uint64_t min_age_ns, std::uint64_t leak_age_ns) {
  const std::uint64_t age = now_ns > info.ts_ns ? now_ns - info.ts_ns : 0;
  if (min_age_ns && age < min_age_ns) return;
  SiteRow& r = row(info.stack);
  r.outstanding += 1;
  r.outstanding_bytes += info.size;
  if (leak_age_ns && age >= leak_age_ns) {
    r.old += 1;
    r.old_bytes += info.size;
  }
  if (r.oldest_ns == 0 || info.ts_ns < r.oldest_ns) r.oldest_ns = info.ts_ns;
}

std::vector<SiteRow> SiteTable::rows() const {
  std::vector<SiteRow> out;
  out.reserve(rows_.size());
  for (const auto& [k, r] : rows_) out.push_back(r);
  return out;
}

std::vector<SiteRow> SiteTable::top(std::vector<SiteRow> rows, std::size_t n) {
  auto by_bytes = [](const SiteRow& a, const SiteRow& b) { return a.bytes > b.bytes; };
  if (n == 0 || rows.size() <= n) {
    std::stable_sort(rows.begin(), rows.end(), by_bytes);
    return rows;
  }
  std::set<std::size_t> keep;
  std::vector<std::size_t> idx(rows.size());
  for (std::size_t i = 0; i < idx.size(); ++i) idx[i] = i;
  // Only sites that have some of the measure compete for its top n.
  auto pick = [&](auto measure) {
    std::stable_sort(idx.begin(), idx.end(), [&](std::size_t a, std::size_t b) {
      return measure(rows[a]) > measure(rows[b]);
    });
    for (std::size_t i = 0; i < n && measure(rows[idx[i]]) > 0; ++i) keep.insert(idx[i]);
  };
  pick([](const SiteRow& r) { return r.bytes; });
  pick([](const SiteRow& r) { return r.allocs; });
  pick([](const SiteRow& r) { return r.outstanding_bytes; });
  std::vector<SiteRow> out;
  for (std::size_t i : keep) out.push_back(rows[i]);
  std::stable_sort(out.begin(), out.end(), by_bytes);
  return out;
}

}  // namespace loupe::memalloc
