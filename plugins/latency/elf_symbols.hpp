// SPDX-License-Identifier: Apache-2.0
//
// The ELF symbol -> uprobe offset lookup is the SDK's (loupe/sdk/uprobe.hpp). This name
// stays only for bench/latency, which includes it; new code uses the SDK directly.
#ifndef LOUPE_LATENCY_ELF_SYMBOLS_HPP
#define LOUPE_LATENCY_ELF_SYMBOLS_HPP

#include "loupe/sdk/uprobe.hpp"

namespace loupe::latency {
using sdk::ElfFunction;
using sdk::find_elf_function;
}  // namespace loupe::latency

#endif  // LOUPE_LATENCY_ELF_SYMBOLS_HPP
