// SPDX-License-Identifier: Apache-2.0
#include "bio_hist.hpp"

#include <algorithm>
#include <cstdint>

namespace loupe::biolat {
namespace {

std::uint64_t slot_lower(std::uint32_t i) { return i == 0 ? 0 : (1ull << i); }
std::uint64_t slot_upper(std::uint32_t i) {
  return i + 1 >= BIO_HIST_SLOTS ? UINT64_MAX : (1ull << (i + 1));
}

}  // namespace

void merge_into(bio_hist& into, const bio_hist& h) {
  if (h.count == 0) return;
  if (into.count == 0 || h.min < into.min) into.min = h.min;
  into.max = std::max(into.max, h.max);
  into.count += h.count;
  into.sum += h.sum;
  for (std::uint32_t i = 0; i < BIO_HIST_SLOTS; ++i) into.slots[i] += h.slots[i];
}

bio_stats merge_per_cpu(std::span<const bio_stats> per_cpu) {
  bio_stats out{};
  for (const auto& s : per_cpu) {
    merge_into(out.queue, s.queue);
    merge_into(out.service, s.service);
    merge_into(out.total, s.total);
    merge_into(out.size, s.size);
    out.bytes += s.bytes;
    out.sequential += s.sequential;
    out.random += s.random;
    out.errors += s.errors;
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
  }
  return out;
}

bio_hist interval_delta(const bio_hist& now, const bio_hist& before) {
  bio_hist d{};
  d.count = now.count - before.count;
  d.sum = now.sum - before.sum;
  int first = -1, last = -1;
  for (std::uint32_t i = 0; i < BIO_HIST_SLOTS; ++i) {
    d.slots[i] = now.slots[i] - before.slots[i];
    if (d.slots[i] == 0) continue;
    if (first < 0) first = static_cast<int>(i);
    last = static_cast<int>(i);
  }
  if (first < 0) return d;
  d.min = std::max<std::uint64_t>(now.min, slot_lower(static_cast<std::uint32_t>(first)));
  std::uint64_t hi = slot_upper(static_cast<std::uint32_t>(last));
  d.max = std::min<std::uint64_t>(now.max, hi == UINT64_MAX ? hi : hi - 1);
  return d;
}

bio_stats interval_delta(const bio_stats& now, const bio_stats& before) {
  bio_stats d{};
  d.queue = interval_delta(now.queue, before.queue);
  d.service = interval_delta(now.service, before.service);
  d.total = interval_delta(now.total, before.total);
  d.size = interval_delta(now.size, before.size);
  d.bytes = now.bytes - before.bytes;
  d.sequential = now.sequential - before.sequential;
  d.random = now.random - before.random;
  d.errors = now.errors - before.errors;
  return d;
}

std::vector<loupe_bucket> to_buckets(const bio_hist& h) {
  std::vector<loupe_bucket> out;
  for (std::uint32_t i = 0; i < BIO_HIST_SLOTS; ++i)
    if (h.slots[i]) out.push_back({slot_lower(i), slot_upper(i), h.slots[i]});
  return out;
}

}  // namespace loupe::biolat
