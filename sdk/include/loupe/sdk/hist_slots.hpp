// SPDX-License-Identifier: Apache-2.0
//
// Slot <-> bounds of the BPF histogram layouts (bpf/include/loupe/hist.bpf.h), shared by
// the record builder and the histogram helpers.
//
// Slots count the upper side of each bound, as Prometheus native histograms and
// OpenTelemetry exponential histograms do, so a log2 slot is exactly one of their schema-0
// buckets (base 2):
//   slot 0      = {0}                                  (their zero bucket, threshold 0)
//   slot i >= 1 = (2^(i-2), 2^(i-1)]                   (their bucket index i - 1)
// The log2-linear layout splits each (2^e, 2^(e+1)] into LOUPE_HIST_SUB equal parts
// (e >= LOUPE_HIST_SUB_BITS; below, one slot per integer). Those parts are linear, where a
// finer native schema's are geometric: only the powers of two are common bounds.
//
// Values are integers, so a slot's set is also the half-open [lower, upper) of loupe_bucket
// with lower = its exclusive bound + 1 and upper = its inclusive bound + 1: (512, 1024] is
// {513 ... 1024} = [513, 1025). The last slot of a histogram holds the rest (upper
// UINT64_MAX).
#ifndef LOUPE_SDK_HIST_SLOTS_HPP
#define LOUPE_SDK_HIST_SLOTS_HPP

#include <cstdint>

#include "loupe/hist.h"

namespace loupe::sdk {

struct SlotBounds {
  std::uint64_t lower;  // inclusive
  std::uint64_t upper;  // exclusive; UINT64_MAX for the open last slot
};

// Log2 slot `slot` of a histogram with `n_slots` log2 slots (the last one takes the rest).
constexpr SlotBounds log2_slot_bounds(std::uint32_t slot,
                                      std::uint32_t n_slots = LOUPE_HIST_LOG2_SLOTS) {
  if (slot <= 1) return {slot, slot + 1ull};
  std::uint64_t lo = (1ull << (slot - 2)) + 1;
  std::uint64_t hi = slot + 1 >= n_slots || slot >= 64 ? UINT64_MAX : (1ull << (slot - 1)) + 1;
  return {lo, hi};
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

// The log2 slot of `v`, as loupe_log2_slot() computes it (clamped to n_slots - 1).
constexpr std::uint32_t log2_slot(std::uint64_t v, std::uint32_t n_slots = LOUPE_HIST_LOG2_SLOTS) {
  std::uint32_t s =
      v <= 1 ? static_cast<std::uint32_t>(v) : 65 - static_cast<std::uint32_t>(__builtin_clzll(v - 1));
  return s < n_slots ? s : n_slots - 1;
}

// The log2-linear slot of `v`, as loupe_linear_slot() computes it.
constexpr std::uint32_t linear_slot(std::uint64_t v) {
  if (v <= LOUPE_HIST_SUB) return static_cast<std::uint32_t>(v);
  std::uint64_t u = v - 1;
  std::uint32_t e = 63 - static_cast<std::uint32_t>(__builtin_clzll(u));
  std::uint32_t s = (e - LOUPE_HIST_SUB_BITS + 1) * LOUPE_HIST_SUB +
                    static_cast<std::uint32_t>((u >> (e - LOUPE_HIST_SUB_BITS)) & (LOUPE_HIST_SUB - 1)) +
                    1;
  return s < LOUPE_HIST_LINEAR_SLOTS ? s : LOUPE_HIST_LINEAR_SLOTS - 1;
}

}  // namespace loupe::sdk

#endif  // LOUPE_SDK_HIST_SLOTS_HPP
