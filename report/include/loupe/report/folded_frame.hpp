// SPDX-License-Identifier: Apache-2.0
//
// One frame as flamegraph.pl's folded format spells it, following perf script |
// stackcollapse-perf.pl: its name (frame_name.hpp), with kernel frames ending in `_[k]`
// and JIT frames in `_[j]`.
#ifndef LOUPE_REPORT_FOLDED_FRAME_HPP
#define LOUPE_REPORT_FOLDED_FRAME_HPP

#include <string>
#include <string_view>

#include "loupe/abi/records.h"

namespace loupe::report {

// Appends the frame's text to `out`. ';' separates frames and a newline ends a line,
// so both are replaced inside names.
void append_folded_frame(const loupe_frame& frame, std::string& out);

// Appends `text` with the separators of the format replaced.
void append_folded_text(std::string_view text, std::string& out);

}  // namespace loupe::report

#endif  // LOUPE_REPORT_FOLDED_FRAME_HPP
