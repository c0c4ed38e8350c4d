// SPDX-License-Identifier: Apache-2.0
//
// A record's buckets as a Prometheus native histogram of schema 0 (base 2; bucket index i
// is (2^(i-1), 2^i], the zero bucket [0, 0]), or nothing when they do not fit one.
//
// loupe's log2 buckets fit exactly: bucket {0} is the zero bucket, (2^(i-2), 2^(i-1)] is
// index i - 1. Any layout whose buckets each lie inside one schema-0 bucket fits too (the
// log2-linear parts, summed per power of two; explicit bounds that never straddle one).
// A bucket that straddles a power of two, or holds 0 with other values, cannot be split
// without inventing counts, so the whole histogram stays classic.
#ifndef LOUPE_SINKS_PROMETHEUS_NATIVE_HISTOGRAM_HPP
#define LOUPE_SINKS_PROMETHEUS_NATIVE_HISTOGRAM_HPP

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "loupe/abi/records.h"

namespace loupe::sinks {

struct NativeSpan {
  std::int32_t offset;  // gap after the previous span; the first span's start index
  std::uint32_t length;
};

struct NativeHistogram {
  std::uint64_t zero_count = 0;  // values equal to 0 (threshold 0)
  std::vector<NativeSpan> spans;
  std::vector<std::int64_t> deltas;  // each bucket's count minus the previous bucket's
};

// Buckets of integers [lower, upper), ascending, as loupe_histogram carries them.
// nullopt with `why` set when one does not lie inside a single schema-0 bucket.
std::optional<NativeHistogram> native_schema0(const loupe_bucket* buckets, std::uint32_t n,
                                              std::string* why = nullptr);

}  // namespace loupe::sinks

#endif  // LOUPE_SINKS_PROMETHEUS_NATIVE_HISTOGRAM_HPP
