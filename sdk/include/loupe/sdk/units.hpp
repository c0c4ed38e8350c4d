// SPDX-License-Identifier: Apache-2.0
//
// A value with its record unit, for people: "12.86 ms", "1.5 MiB", "102". Sinks and the
// CLI print figures the same way.
#ifndef LOUPE_SDK_UNITS_HPP
#define LOUPE_SDK_UNITS_HPP

#include <cstdio>
#include <string>

namespace loupe::sdk {

inline std::string human_amount(double v, const std::string& unit) {
  char buf[64];
  if (unit == "ns") {
    if (v >= 1e9)
      std::snprintf(buf, sizeof(buf), "%.2f s", v / 1e9);
    else if (v >= 1e6)
      std::snprintf(buf, sizeof(buf), "%.2f ms", v / 1e6);
    else if (v >= 1e3)
      std::snprintf(buf, sizeof(buf), "%.2f us", v / 1e3);
    else
      std::snprintf(buf, sizeof(buf), "%.0f ns", v);
  } else if (unit == "bytes") {
    if (v >= 1 << 20)
      std::snprintf(buf, sizeof(buf), "%.1f MiB", v / (1 << 20));
    else if (v >= 1 << 10)
      std::snprintf(buf, sizeof(buf), "%.1f KiB", v / (1 << 10));
    else
      std::snprintf(buf, sizeof(buf), "%.0f B", v);
  } else if (unit.empty() || unit == "count") {
    std::snprintf(buf, sizeof(buf), "%.6g", v);
  } else {
    std::snprintf(buf, sizeof(buf), "%.6g %s", v, unit.c_str());
  }
  return buf;
}

}  // namespace loupe::sdk

#endif  // LOUPE_SDK_UNITS_HPP
