// SPDX-License-Identifier: Apache-2.0
#include "loupe/report/folded_frame.hpp"

#include <cstdio>

namespace loupe::report {

void append_folded_text(std::string_view text, std::string& out) {
  for (char c : text) {
    if (c == ';')
      out += ':';
    else if (c == '\n' || c == '\r')
      out += ' ';
    else
      out += c;
  }
}

void append_folded_frame(const loupe_frame& frame, std::string& out) {
  if (frame.symbol && *frame.symbol) {
    append_folded_text(frame.symbol, out);
  } else if (frame.module && *frame.module) {
    // The file name is enough to tell modules apart in a flame graph; full paths would
    // make every unresolved box unreadable.
    std::string_view module(frame.module);
    if (auto slash = module.rfind('/');
        slash != std::string_view::npos && slash + 1 < module.size())
      module.remove_prefix(slash + 1);
    append_folded_text(module, out);
    char off[32];
    std::snprintf(off, sizeof(off), "+0x%llx", static_cast<unsigned long long>(frame.offset));
    out += off;
  } else {
    out += "[unknown]";
  }
  if (frame.kind == LOUPE_FRAME_KERNEL)
    out += "_[k]";
  else if (frame.kind == LOUPE_FRAME_JIT)
    out += "_[j]";
}

}  // namespace loupe::report
