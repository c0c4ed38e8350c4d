// SPDX-License-Identifier: Apache-2.0
#ifndef LOUPE_SINKS_CONSOLE_HUMAN_UNITS_HPP
#define LOUPE_SINKS_CONSOLE_HUMAN_UNITS_HPP

#include <cstdint>
#include <string>
#include <string_view>

namespace loupe::sinks {

// "ns"/"us"/"ms"/"s" print as time (1.53 ms), "bytes"/"B" as binary sizes (4.00 KiB),
// anything else as a number followed by its unit. Three significant digits: enough to
// compare, short enough to align.
std::string format_quantity(double value, std::string_view unit);
// Bucket bounds: like format_quantity, but UINT64_MAX is the open end "∞".
std::string format_bound(std::uint64_t value, std::string_view unit);
// A bucket of integers [lower, upper) written as the same set with the upper side closed,
// "(lower - 1, upper - 1]", the side log2 buckets count (a power of two tops its bucket, as
// in Prometheus); "[0, ..." when it holds 0, "..., ∞)" when open.
std::string format_range(std::uint64_t lower, std::uint64_t upper, std::string_view unit);
// 1234567 → "1,234,567".
std::string format_count(std::uint64_t n);
// A metric value: integral values with separators, others with 6 significant digits.
std::string format_number(double v);
// "12.3%"
std::string format_percent(double fraction);
// Local wall-clock "HH:MM:SS.mmm" of a CLOCK_REALTIME ns timestamp.
std::string format_clock(std::uint64_t wall_ns);
// "5.00 s" between two CLOCK_REALTIME ns timestamps.
std::string format_span(std::uint64_t start_ns, std::uint64_t end_ns);

bool is_time_unit(std::string_view unit);

}  // namespace loupe::sinks

#endif
