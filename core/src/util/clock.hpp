// SPDX-License-Identifier: Apache-2.0
//
// The clocks of the record ABI (LOUPE_CLOCK_*), read the one way the core reads them. BPF
// programs stamp events with bpf_ktime_get_ns (monotonic) or bpf_ktime_get_boot_ns, so
// user space must read the same clock to compare with them.
#ifndef LOUPE_UTIL_CLOCK_HPP
#define LOUPE_UTIL_CLOCK_HPP

#include <cstdint>

namespace loupe {

// Nanoseconds on LOUPE_CLOCK_MONOTONIC, _BOOTTIME or _REALTIME (unknown ids read monotonic).
std::uint64_t clock_ns(std::uint32_t clock);

}  // namespace loupe

#endif  // LOUPE_UTIL_CLOCK_HPP
