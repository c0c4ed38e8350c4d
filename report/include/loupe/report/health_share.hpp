// SPDX-License-Identifier: Apache-2.0
//
// A health row's count as a part of what its producer says it is a part of (ABI 1.11's
// whole and whole_unit): "3 of 196 stacks (1.5%)". The console's verdict and the findings
// say a loss the same way.
#ifndef LOUPE_REPORT_HEALTH_SHARE_HPP
#define LOUPE_REPORT_HEALTH_SHARE_HPP

#include <cstdint>
#include <string>
#include <string_view>

namespace loupe::report {

// "1,234,567"
std::string count_text(std::uint64_t n);

// "3 of 196 stacks (1.5%)"; `whole` > 0. Two significant digits however small ("0.033%"):
// a loss of 0.0% reads as none.
std::string health_share(std::uint64_t part, std::uint64_t whole, std::string_view unit);

}  // namespace loupe::report

#endif  // LOUPE_REPORT_HEALTH_SHARE_HPP
