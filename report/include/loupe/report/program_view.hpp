// SPDX-License-Identifier: Apache-2.0
//
// The frames of a stack that are the program's own view of it, as every report that names
// functions (the console's flat table and rows, the findings) takes them: its language
// frames when it has any (every Python stack is under _PyEval_EvalFrameDefault, every Java
// one under call stubs: true of every run of that runtime, never what a reader changes);
// else its user frames (every off-CPU stack is under __schedule); else the kernel's. A
// waker's stack after a "--" frame is another task's and is left out. Innermost first.
#ifndef LOUPE_REPORT_PROGRAM_VIEW_HPP
#define LOUPE_REPORT_PROGRAM_VIEW_HPP

#include <cstddef>
#include <cstdint>
#include <string_view>
#include <vector>

#include "loupe/abi/records.h"

namespace loupe::report {

// `kind(f)`: its loupe_frame_kind; `symbol(f)`: its symbol, empty when it has none.
template <typename Frame, typename Kind, typename Symbol>
std::vector<const Frame*> program_view(const Frame* frames, std::size_t n, Kind kind,
                                       Symbol symbol) {
  std::vector<const Frame*> lang, user, all;
  for (std::size_t i = 0; i < n; ++i) {
    const Frame& f = frames[i];
    const std::string_view sym = symbol(f);
    if (sym == "--") break;
    all.push_back(&f);
    const std::uint32_t k = kind(f);
    // A language frame without a name says nothing of the program (and a frame-pointer
    // walk through code without them can leave an address that reads as one).
    if (LOUPE_FRAME_IS_SOURCE(k) && !sym.empty() && sym != "[jvm stub]")
      lang.push_back(&f);
    else if (k != LOUPE_FRAME_KERNEL)
      user.push_back(&f);
  }
  return !lang.empty() ? lang : !user.empty() ? user : all;
}

}  // namespace loupe::report

#endif  // LOUPE_REPORT_PROGRAM_VIEW_HPP
