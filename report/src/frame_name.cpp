// SPDX-License-Identifier: Apache-2.0
#include "loupe/report/frame_name.hpp"

#include <cstdio>
#include <string>
#include <string_view>

namespace loupe::report {

namespace {

std::string_view base_name(std::string_view path) {
  if (auto slash = path.rfind('/'); slash != std::string_view::npos && slash + 1 < path.size())
    path.remove_prefix(slash + 1);
  return path;
}

// "qualname (file.py:line)", "pkg.Class.method (Class.java:line)": the function as its
// source names it, and where it was.
std::string source_frame_name(const loupe_frame& frame) {
  if (!frame.symbol || !*frame.symbol)
    return frame.kind == LOUPE_FRAME_JAVA ? "[java]"
           : frame.kind == LOUPE_FRAME_JS ? "[js]"
                                          : "[python]";
  std::string out = frame.symbol;
  if (frame.module && *frame.module) {
    out += " (";
    out += base_name(frame.module);
    if (frame.offset) out += ":" + std::to_string(frame.offset);
    out += ")";
  }
  return out;
}

}  // namespace

std::string frame_name(const loupe_frame& frame) {
  if (LOUPE_FRAME_IS_SOURCE(frame.kind)) return source_frame_name(frame);
  if (frame.symbol && *frame.symbol) return frame.symbol;
  if (frame.module && *frame.module) {
    std::string_view module = base_name(frame.module);
    char off[32];
    std::snprintf(off, sizeof(off), "+0x%llx", static_cast<unsigned long long>(frame.offset));
    return std::string(module) + off;
  }
  return "[unknown]";
}

}  // namespace loupe::report
