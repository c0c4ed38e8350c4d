// SPDX-License-Identifier: Apache-2.0
#include "loupe/report/health_share.hpp"

#include <cstdio>

namespace loupe::report {

std::string count_text(std::uint64_t n) {
  std::string digits = std::to_string(n);
  for (int i = static_cast<int>(digits.size()) - 3; i > 0; i -= 3)
    digits.insert(static_cast<std::size_t>(i), ",");
  return digits;
}

std::string health_share(std::uint64_t part, std::uint64_t whole, std::string_view unit) {
  std::string s = count_text(part) + " of " + count_text(whole);
  if (!unit.empty()) s.append(" ").append(unit);
  const double pct = whole ? 100.0 * static_cast<double>(part) / static_cast<double>(whole) : 0;
  char share[32];
  std::snprintf(share, sizeof share, pct >= 10 ? "%.0f%%" : pct >= 1 ? "%.1f%%" : "%.2g%%", pct);
  return s + " (" + share + ")";
}

}  // namespace loupe::report
