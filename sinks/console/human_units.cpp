// SPDX-License-Identifier: Apache-2.0
#include "human_units.hpp"

#include <cmath>
#include <cstdio>
#include <ctime>

namespace loupe::sinks {
namespace {

double ns_per(std::string_view unit) {
  if (unit == "ns") return 1;
  if (unit == "us" || unit == "µs") return 1e3;
  if (unit == "ms") return 1e6;
  if (unit == "s") return 1e9;
  return 0;
}

bool is_byte_unit(std::string_view unit) {
  return unit == "bytes" || unit == "B" || unit == "byte";
}

std::string three_digits(double x, const char* suffix) {
  char buf[64];
  double a = std::fabs(x);
  const char* fmt = a < 10 ? "%.2f %s" : a < 100 ? "%.1f %s" : "%.0f %s";
  std::snprintf(buf, sizeof buf, fmt, x, suffix);
  return buf;
}

std::string scaled(double v, const double* steps, const char* const* names, int n) {
  double a = std::fabs(v);
  int i = 0;
  while (i + 1 < n && a >= steps[i + 1]) ++i;
  if (i == 0) {
    char buf[64];
    std::snprintf(buf, sizeof buf, "%.0f %s", v, names[0]);
    return buf;
  }
  return three_digits(v / steps[i], names[i]);
}

}  // namespace

bool is_time_unit(std::string_view unit) {
  return ns_per(unit) != 0;
}

std::string format_quantity(double value, std::string_view unit) {
  if (double k = ns_per(unit); k != 0) {
    static const double steps[] = {1, 1e3, 1e6, 1e9};
    static const char* const names[] = {"ns", "µs", "ms", "s"};
    double ns = value * k;
    if (std::fabs(ns) < 1000 && ns != std::floor(ns)) return three_digits(ns, "ns");
    return scaled(ns, steps, names, 4);
  }
  if (is_byte_unit(unit)) {
    static const double steps[] = {1, 1024.0, 1024.0 * 1024, 1024.0 * 1024 * 1024,
                                   1024.0 * 1024 * 1024 * 1024};
    static const char* const names[] = {"B", "KiB", "MiB", "GiB", "TiB"};
    return scaled(value, steps, names, 5);
  }
  std::string out = format_number(value);
  if (!unit.empty() && unit != "count") {
    out += ' ';
    out += unit;
  }
  return out;
}

std::string format_bound(std::uint64_t value, std::string_view unit) {
  if (value == UINT64_MAX) return "∞";
  return format_quantity(static_cast<double>(value), unit);
}

std::string format_range(std::uint64_t lower, std::uint64_t upper, std::string_view unit) {
  std::string lo = lower == 0 ? "[" + format_bound(0, unit) : "(" + format_bound(lower - 1, unit);
  std::string hi =
      upper == UINT64_MAX ? format_bound(upper, unit) + ")" : format_bound(upper - 1, unit) + "]";
  return lo + ", " + hi;
}

std::string format_count(std::uint64_t n) {
  std::string digits = std::to_string(n);
  std::string out;
  int lead = static_cast<int>(digits.size() % 3);
  for (std::size_t i = 0; i < digits.size(); ++i) {
    if (i && (static_cast<int>(i) - lead) % 3 == 0) out += ',';
    out += digits[i];
  }
  return out;
}

std::string format_number(double v) {
  if (std::isfinite(v) && v == std::floor(v) && std::fabs(v) < 1e15) {
    std::string s = format_count(static_cast<std::uint64_t>(std::fabs(v)));
    return v < 0 ? "-" + s : s;
  }
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.6g", v);
  return buf;
}

std::string format_percent(double fraction) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.1f%%", fraction * 100.0);
  return buf;
}

std::string format_clock(std::uint64_t wall_ns) {
  std::time_t secs = static_cast<std::time_t>(wall_ns / 1000000000ull);
  std::tm tm{};
  localtime_r(&secs, &tm);
  char buf[48];
  std::snprintf(buf, sizeof buf, "%02d:%02d:%02d.%03u", tm.tm_hour, tm.tm_min, tm.tm_sec,
                static_cast<unsigned>((wall_ns / 1000000ull) % 1000));
  return buf;
}

std::string format_span(std::uint64_t start_ns, std::uint64_t end_ns) {
  if (end_ns <= start_ns) return "0 s";
  return format_quantity(static_cast<double>(end_ns - start_ns), "ns");
}

}  // namespace loupe::sinks
