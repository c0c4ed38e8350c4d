// SPDX-License-Identifier: Apache-2.0
//
// Per-CPU loupe_hist values -> one histogram, interval deltas, and loupe_bucket arrays
// whose bounds match the BPF-side slot functions in loupe/hist.bpf.h.
#ifndef LOUPE_LATENCY_HIST_MERGE_HPP
#define LOUPE_LATENCY_HIST_MERGE_HPP

#include <cstdint>
#include <span>
#include <vector>

#include "loupe/abi/records.h"
#include "loupe/hist.h"

namespace loupe::latency {

struct MergedHist {
  std::uint64_t count = 0;
  std::uint64_t sum = 0;
  std::uint64_t min = 0;
  std::uint64_t max = 0;
  std::vector<std::uint64_t> slots = std::vector<std::uint64_t>(LOUPE_HIST_LINEAR_SLOTS, 0);
};

struct SlotBounds {
  std::uint64_t lower;  // inclusive
  std::uint64_t upper;  // exclusive
};

SlotBounds log2_slot_bounds(std::uint32_t slot);
SlotBounds linear_slot_bounds(std::uint32_t slot);

// Sums the CPUs' values; min is the smallest min among CPUs that saw a value.
MergedHist merge_per_cpu(std::span<const loupe_hist> per_cpu);

// `now - before` for an interval report. Bucket counts, count and sum are exact; min and
// max of the interval are not kept by the kernel, so they are the bounds of the lowest and
// highest non-empty interval buckets, clamped by the session's min and max.
MergedHist interval_delta(const MergedHist& now, const MergedHist& before, bool linear);

// Non-empty buckets, ascending, with their [lower, upper) bounds.
std::vector<loupe_bucket> to_buckets(const MergedHist& h, bool linear);

}  // namespace loupe::latency

#endif  // LOUPE_LATENCY_HIST_MERGE_HPP
