// SPDX-License-Identifier: Apache-2.0
//
// Slot <-> bounds of the BPF log2 histogram layout (bpf/include/loupe/hist.bpf.h), shared
// by the record builder and the histogram helpers (loupe/sdk/histogram.hpp, which adds the
// log2-linear layout and the defaults of struct loupe_hist). Needs no BPF include path.
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

namespace loupe::sdk {

struct SlotBounds {
  std::uint64_t lower;  // inclusive
  std::uint64_t upper;  // exclusive; UINT64_MAX for the open last slot
};

// Log2 slot `slot` of a histogram with `n_slots` log2 slots (the last one takes the rest).
constexpr SlotBounds log2_slot_bounds(std::uint32_t slot, std::uint32_t n_slots) {
  if (slot <= 1) return {slot, slot + 1ull};
  std::uint64_t lo = (1ull << (slot - 2)) + 1;
  std::uint64_t hi = slot + 1 >= n_slots || slot >= 65 ? UINT64_MAX : (1ull << (slot - 1)) + 1;
  return {lo, hi};
}

// The log2 slot of `v`, as loupe_log2_slot() computes it (clamped to n_slots - 1).
constexpr std::uint32_t log2_slot(std::uint64_t v, std::uint32_t n_slots) {
  std::uint32_t s = v <= 1 ? static_cast<std::uint32_t>(v)
                           : 65 - static_cast<std::uint32_t>(__builtin_clzll(v - 1));
  return s < n_slots ? s : n_slots - 1;
}

}  // namespace loupe::sdk

#endif  // LOUPE_SDK_HIST_SLOTS_HPP
