// SPDX-License-Identifier: Apache-2.0
#include "hist_merge.hpp"

#include <algorithm>

namespace loupe::latency {

SlotBounds log2_slot_bounds(std::uint32_t slot) {
  // Slot 0 holds 0 and 1; the last slot also takes everything the BPF side clamped.
  std::uint64_t lo = slot == 0 ? 0 : (1ull << slot);
  std::uint64_t hi = slot + 1 >= LOUPE_HIST_LOG2_SLOTS ? UINT64_MAX : (1ull << (slot + 1));
  return {lo, hi};
}

SlotBounds linear_slot_bounds(std::uint32_t slot) {
  if (slot < LOUPE_HIST_SUB) return {slot, slot + 1ull};
  // Inverse of loupe_linear_slot(): slot = (e - SUB_BITS + 1) * SUB + mantissa.
  std::uint32_t e = slot / LOUPE_HIST_SUB + LOUPE_HIST_SUB_BITS - 1;
  std::uint64_t m = slot % LOUPE_HIST_SUB;
  std::uint32_t shift = e - LOUPE_HIST_SUB_BITS;
  std::uint64_t lo = (LOUPE_HIST_SUB + m) << shift;
  std::uint64_t hi = slot + 1 >= LOUPE_HIST_LINEAR_SLOTS ? UINT64_MAX
                                                         : (LOUPE_HIST_SUB + m + 1) << shift;
  if (e == 63 && m == LOUPE_HIST_SUB - 1) hi = UINT64_MAX;  // 2^64 does not fit
  return {lo, hi};
}

MergedHist merge_per_cpu(std::span<const loupe_hist> per_cpu) {
  MergedHist out;
  bool have_min = false;
  for (const auto& h : per_cpu) {
    if (h.count == 0) continue;
    out.count += h.count;
    out.sum += h.sum;
    if (!have_min || h.min < out.min) out.min = h.min;
    have_min = true;
    out.max = std::max(out.max, static_cast<std::uint64_t>(h.max));
    for (std::size_t i = 0; i < LOUPE_HIST_LINEAR_SLOTS; ++i) out.slots[i] += h.slots[i];
  }
  return out;
}

MergedHist interval_delta(const MergedHist& now, const MergedHist& before, bool linear) {
  MergedHist d;
  d.count = now.count - before.count;
  d.sum = now.sum - before.sum;
  for (std::size_t i = 0; i < d.slots.size(); ++i) d.slots[i] = now.slots[i] - before.slots[i];
  if (d.count == 0) return d;
  auto bounds = linear ? linear_slot_bounds : log2_slot_bounds;
  auto first = std::find_if(d.slots.begin(), d.slots.end(), [](auto c) { return c != 0; });
  auto last = std::find_if(d.slots.rbegin(), d.slots.rend(), [](auto c) { return c != 0; });
  if (first == d.slots.end()) return d;
  d.min = std::max(now.min, bounds(static_cast<std::uint32_t>(first - d.slots.begin())).lower);
  std::uint64_t hi = bounds(static_cast<std::uint32_t>(d.slots.rend() - last - 1)).upper;
  d.max = std::min(now.max, hi == UINT64_MAX ? hi : hi - 1);
  return d;
}

std::vector<loupe_bucket> to_buckets(const MergedHist& h, bool linear) {
  std::vector<loupe_bucket> out;
  std::size_t n = linear ? LOUPE_HIST_LINEAR_SLOTS : LOUPE_HIST_LOG2_SLOTS;
  for (std::size_t i = 0; i < n; ++i) {
    if (h.slots[i] == 0) continue;
    auto b = linear ? linear_slot_bounds(static_cast<std::uint32_t>(i))
                    : log2_slot_bounds(static_cast<std::uint32_t>(i));
    out.push_back({b.lower, b.upper, h.slots[i]});
  }
  return out;
}

}  // namespace loupe::latency
