// SPDX-License-Identifier: Apache-2.0
//
// The user-space twin of bpf/include/loupe/hist.bpf.h: per-CPU histogram values summed
// into one, interval deltas, and loupe_bucket arrays whose bounds are the BPF side's slots.
//
// Every function takes any struct of the LOUPE_HIST_RECORD shape (count, sum, min, max and
// an array slots[N]): struct loupe_hist (loupe/hist.h), or a plugin's smaller one. "linear"
// selects the log2-linear slots of loupe_linear_slot(), otherwise the log2 slots of
// loupe_log2_slot() (slot 0 = {0}, slot i = (2^(i-2), 2^(i-1)], the last slot holds the
// rest; loupe/sdk/hist_slots.hpp has the layouts).
//
//   auto per_cpu = sdk::read_per_cpu<loupe_hist>(bpf_map__fd(skel->maps.hist), &key);
//   loupe_hist total = sdk::hist_merge_per_cpu<loupe_hist>(per_cpu);
//   loupe_hist window = sdk::hist_interval_delta(total, previous, linear);
//   sdk::add_histogram(rb, "ns", window, linear).emit(host);
#ifndef LOUPE_SDK_HISTOGRAM_HPP
#define LOUPE_SDK_HISTOGRAM_HPP

#include <algorithm>
#include <cstdint>
#include <iterator>
#include <optional>
#include <span>
#include <type_traits>
#include <vector>

#include "loupe/abi/records.h"
#include "loupe/hist.h"
#include "loupe/sdk/hist_slots.hpp"
#include "loupe/sdk/percpu.hpp"
#include "loupe/sdk/records.hpp"

namespace loupe::sdk {

// The log2 slots of struct loupe_hist (LOUPE_HIST_LOG2_SLOTS: every u64 has one).
constexpr SlotBounds log2_slot_bounds(std::uint32_t slot) {
  return log2_slot_bounds(slot, LOUPE_HIST_LOG2_SLOTS);
}
constexpr std::uint32_t log2_slot(std::uint64_t v) {
  return log2_slot(v, LOUPE_HIST_LOG2_SLOTS);
}

// Inverse of loupe_linear_slot(): slot - 1 is the slot of v - 1 in a layout of [lo, hi)
// parts, (e - SUB_BITS + 1) * SUB + mantissa.
constexpr SlotBounds linear_slot_bounds(std::uint32_t slot) {
  if (slot <= LOUPE_HIST_SUB) return {slot, slot + 1ull};
  std::uint32_t t = slot - 1;
  std::uint32_t e = t / LOUPE_HIST_SUB + LOUPE_HIST_SUB_BITS - 1;
  std::uint64_t m = t % LOUPE_HIST_SUB;
  std::uint32_t shift = e - LOUPE_HIST_SUB_BITS;
  std::uint64_t lo = ((LOUPE_HIST_SUB + m) << shift) + 1;
  bool last = slot + 1 >= LOUPE_HIST_LINEAR_SLOTS || (e == 63 && m == LOUPE_HIST_SUB - 1);
  std::uint64_t hi = last ? UINT64_MAX : ((LOUPE_HIST_SUB + m + 1) << shift) + 1;
  return {lo, hi};
}

// The log2-linear slot of `v`, as loupe_linear_slot() computes it.
constexpr std::uint32_t linear_slot(std::uint64_t v) {
  if (v <= LOUPE_HIST_SUB) return static_cast<std::uint32_t>(v);
  std::uint64_t u = v - 1;
  std::uint32_t e = 63 - static_cast<std::uint32_t>(__builtin_clzll(u));
  std::uint32_t s =
      (e - LOUPE_HIST_SUB_BITS + 1) * LOUPE_HIST_SUB +
      static_cast<std::uint32_t>((u >> (e - LOUPE_HIST_SUB_BITS)) & (LOUPE_HIST_SUB - 1)) + 1;
  return s < LOUPE_HIST_LINEAR_SLOTS ? s : LOUPE_HIST_LINEAR_SLOTS - 1;
}

namespace detail {
template <typename H>
constexpr std::uint32_t slot_count() {
  return static_cast<std::uint32_t>(std::extent_v<decltype(H::slots)>);
}
// How many of a histogram's slots the scheme uses: loupe_hist keeps room for the
// log2-linear slots and uses only the first LOUPE_HIST_LOG2_SLOTS for log2.
template <typename H>
constexpr std::uint32_t used_slots(bool linear) {
  constexpr std::uint32_t n = slot_count<H>();
  return linear ? n : std::min<std::uint32_t>(n, LOUPE_HIST_LOG2_SLOTS);
}
template <typename H>
constexpr SlotBounds bounds(std::uint32_t slot, bool linear) {
  return linear ? linear_slot_bounds(slot) : log2_slot_bounds(slot, used_slots<H>(false));
}
}  // namespace detail

// Records `v` in user space (exact min, unlike the BPF side's "0 = unset").
template <typename H>
void hist_add(H& h, std::uint64_t v) {
  std::uint32_t slot = log2_slot(v, detail::used_slots<H>(false));
  h.slots[slot] += 1;
  if (h.count == 0 || v < h.min) h.min = v;
  if (v > h.max) h.max = v;
  h.count += 1;
  h.sum += v;
}

// Adds `h` into `into`; min is the smallest min of the histograms that saw a value.
template <typename H>
void hist_merge_into(H& into, const H& h) {
  if (h.count == 0) return;
  if (into.count == 0 || h.min < into.min) into.min = h.min;
  into.max = std::max<std::uint64_t>(into.max, h.max);
  into.count += h.count;
  into.sum += h.sum;
  for (std::uint32_t i = 0; i < detail::slot_count<H>(); ++i) into.slots[i] += h.slots[i];
}

// The CPUs' values of one per-CPU map entry summed into one histogram.
template <typename H>
H hist_merge_per_cpu(std::span<const H> per_cpu) {
  H out{};
  for (const auto& h : per_cpu) hist_merge_into(out, h);
  return out;
}

// `now - before` for an interval report. Bucket counts, count and sum are exact; the kernel
// keeps no per-interval min and max, so they are the bounds of the lowest and highest
// non-empty interval buckets, clamped by the session's min and max.
template <typename H>
H hist_interval_delta(const H& now, const H& before, bool linear = false) {
  H d{};
  d.count = now.count - before.count;
  d.sum = now.sum - before.sum;
  int first = -1, last = -1;
  for (std::uint32_t i = 0; i < detail::slot_count<H>(); ++i) {
    d.slots[i] = now.slots[i] - before.slots[i];
    if (d.slots[i] == 0) continue;
    if (first < 0) first = static_cast<int>(i);
    last = static_cast<int>(i);
  }
  if (d.count == 0 || first < 0) return d;
  d.min = std::max<std::uint64_t>(
      now.min, detail::bounds<H>(static_cast<std::uint32_t>(first), linear).lower);
  std::uint64_t hi = detail::bounds<H>(static_cast<std::uint32_t>(last), linear).upper;
  d.max = std::min<std::uint64_t>(now.max, hi == UINT64_MAX ? hi : hi - 1);
  return d;
}

// Non-empty buckets, ascending, with their [lower, upper) integer bounds (hist_slots.hpp).
template <typename H>
std::vector<loupe_bucket> hist_buckets(const H& h, bool linear = false) {
  std::vector<loupe_bucket> out;
  for (std::uint32_t i = 0; i < detail::used_slots<H>(linear); ++i)
    if (h.slots[i]) {
      SlotBounds b = detail::bounds<H>(i, linear);
      out.push_back({b.lower, b.upper, h.slots[i]});
    }
  return out;
}

// Fills `rb`'s histogram payload from `h` (LOUPE_BUCKETS_LOG2, or LOG2_LINEAR with
// LOUPE_HIST_SUB sub-buckets).
template <typename H>
RecordBuilder& add_histogram(RecordBuilder& rb, const char* unit, const H& h, bool linear = false) {
  return rb.histogram(linear ? LOUPE_BUCKETS_LOG2_LINEAR : LOUPE_BUCKETS_LOG2,
                      linear ? LOUPE_HIST_SUB : 0, unit, hist_buckets(h, linear), h.count, h.sum,
                      h.min, h.max);
}

}  // namespace loupe::sdk

#endif  // LOUPE_SDK_HISTOGRAM_HPP
