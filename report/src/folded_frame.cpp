// SPDX-License-Identifier: Apache-2.0
#include "loupe/report/folded_frame.hpp"

#include "loupe/report/frame_name.hpp"

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
  append_folded_text(frame_name(frame), out);
  if (frame.kind == LOUPE_FRAME_KERNEL)
    out += "_[k]";
  else if (frame.kind == LOUPE_FRAME_JIT)
    out += "_[j]";
}

}  // namespace loupe::report
