// SPDX-License-Identifier: Apache-2.0
//
// Histogram merging is the SDK's (loupe/sdk/histogram.hpp). These names stay only for
// bench/core_paths, which includes this header and compiles hist_merge.cpp; new code uses
// the SDK directly.
#ifndef LOUPE_LATENCY_HIST_MERGE_HPP
#define LOUPE_LATENCY_HIST_MERGE_HPP

#include <span>
#include <vector>

#include "loupe/sdk/histogram.hpp"

namespace loupe::latency {

inline loupe_hist merge_per_cpu(std::span<const loupe_hist> per_cpu) {
  return sdk::hist_merge_per_cpu(per_cpu);
}
inline std::vector<loupe_bucket> to_buckets(const loupe_hist& h, bool linear) {
  return sdk::hist_buckets(h, linear);
}

}  // namespace loupe::latency

#endif  // LOUPE_LATENCY_HIST_MERGE_HPP
