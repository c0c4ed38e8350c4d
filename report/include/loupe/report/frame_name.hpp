// SPDX-License-Identifier: Apache-2.0
//
// A frame's name as every report spells it: the symbol; `module+0xoff` when unresolved,
// with the module's file name (full paths would make every unresolved box unreadable) and
// the offset the symbolizer kept (`addr2line -e <module> 0xoff` names it); `[unknown]`
// when not even the module is known. The folded sink, the html report, pprof and `loupe
// diff` all name a frame so, so that the same stack meets itself across them; each format
// adds its own marks (folded `_[k]`, html ` [k]`) and escapes on top.
#ifndef LOUPE_REPORT_FRAME_NAME_HPP
#define LOUPE_REPORT_FRAME_NAME_HPP

#include <string>

#include "loupe/abi/records.h"

namespace loupe::report {

std::string frame_name(const loupe_frame& frame);

}  // namespace loupe::report

#endif  // LOUPE_REPORT_FRAME_NAME_HPP
