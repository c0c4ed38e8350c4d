// SPDX-License-Identifier: Apache-2.0
#include "native_histogram.hpp"

#include <map>

namespace loupe::sinks {

std::optional<NativeHistogram> native_schema0(const loupe_bucket* buckets, std::uint32_t n,
                                              std::string* why) {
  NativeHistogram out;
  std::map<std::int32_t, std::uint64_t> by_index;
  for (std::uint32_t i = 0; i < n && buckets; ++i) {
    const loupe_bucket& b = buckets[i];
    if (b.count == 0) continue;
    auto refuse = [&](const char* what) {
      if (why)
        *why = "bucket [" + std::to_string(b.lower) + ", " + std::to_string(b.upper) + ") " + what;
      return std::nullopt;
    };
    if (b.upper <= b.lower) return refuse("is empty or reversed");
    if (b.lower == 0) {
      if (b.upper != 1) return refuse("holds 0 and positive values");
      out.zero_count += b.count;
      continue;
    }
    // The bucket as reals: (lower - 1, top]; an open bucket reaches 2^64.
    const std::uint64_t bottom = b.lower - 1;
    std::int32_t index;
    if (b.upper == UINT64_MAX) {
      if (bottom != (1ull << 63)) return refuse("is open above a bound other than 2^63");
      index = 64;
    } else {
      const std::uint64_t top = b.upper - 1;                 // >= 1
      index = top == 1 ? 0 : 64 - __builtin_clzll(top - 1);  // ceil(log2(top))
      if (index > 0 && bottom < (1ull << (index - 1))) return refuse("straddles a power of two");
    }
    by_index[index] += b.count;
  }
  std::int32_t next = 0;  // the index after the last one written
  std::uint64_t previous = 0;
  for (const auto& [index, count] : by_index) {
    if (out.spans.empty() || index != next)
      out.spans.push_back({out.spans.empty() ? index : index - next, 0});
    ++out.spans.back().length;
    out.deltas.push_back(static_cast<std::int64_t>(count - previous));
    previous = count;
    next = index + 1;
  }
  return out;
}

}  // namespace loupe::sinks
