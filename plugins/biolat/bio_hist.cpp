// SPDX-License-Identifier: Apache-2.0
#include "bio_hist.hpp"

#include <algorithm>

#include "loupe/sdk/histogram.hpp"

namespace loupe::biolat {

bio_stats merge_per_cpu(std::span<const bio_stats> per_cpu) {
  bio_stats out{};
  for (const auto& s : per_cpu) {
    sdk::hist_merge_into(out.queue, s.queue);
    sdk::hist_merge_into(out.service, s.service);
    sdk::hist_merge_into(out.total, s.total);
    sdk::hist_merge_into(out.size, s.size);
    out.bytes += s.bytes;
    out.sequential += s.sequential;
    out.random += s.random;
    out.errors += s.errors;
    out.merged += s.merged;
    out.merged_bytes += s.merged_bytes;
  }
  return out;
}

bio_proc merge_per_cpu(std::span<const bio_proc> per_cpu) {
  bio_proc out{};
  for (const auto& p : per_cpu) {
    out.count += p.count;
    out.bytes += p.bytes;
    out.total_ns += p.total_ns;
    out.max_ns = std::max(out.max_ns, p.max_ns);
    out.errors += p.errors;
    out.merged += p.merged;
    out.merged_bytes += p.merged_bytes;
  }
  return out;
}

bio_stats interval_delta(const bio_stats& now, const bio_stats& before) {
  bio_stats d{};
  d.queue = sdk::hist_interval_delta(now.queue, before.queue);
  d.service = sdk::hist_interval_delta(now.service, before.service);
  d.total = sdk::hist_interval_delta(now.total, before.total);
  d.size = sdk::hist_interval_delta(now.size, before.size);
  d.bytes = now.bytes - before.bytes;
  d.sequential = now.sequential - before.sequential;
  d.random = now.random - before.random;
  d.errors = now.errors - before.errors;
  d.merged = now.merged - before.merged;
  d.merged_bytes = now.merged_bytes - before.merged_bytes;
  return d;
}

}  // namespace loupe::biolat
