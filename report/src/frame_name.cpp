// SPDX-License-Identifier: Apache-2.0
#include "loupe/report/frame_name.hpp"

#include <cstdio>
#include <string_view>

namespace loupe::report {

std::string frame_name(const loupe_frame& frame) {
  if (frame.symbol && *frame.symbol) return frame.symbol;
  if (frame.module && *frame.module) {
    std::string_view module(frame.module);
    if (auto slash = module.rfind('/');
        slash != std::string_view::npos && slash + 1 < module.size())
      module.remove_prefix(slash + 1);
    char off[32];
    std::snprintf(off, sizeof(off), "+0x%llx", static_cast<unsigned long long>(frame.offset));
    return std::string(module) + off;
  }
  return "[unknown]";
}

}  // namespace loupe::report
