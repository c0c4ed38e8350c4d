// SPDX-License-Identifier: Apache-2.0
//
// Fuzzes the perf-map parser (/tmp/perf-PID.map, written by JITs, so by the profiled
// program: untrusted) and its lookups: after parsing, addresses at and around every
// parsed start, and some from the input, are looked up and each hit is checked.
#include <cstdint>
#include <cstring>
#include <string>

#include "fuzz_file.hpp"
#include "symbols/perf_map.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  FuzzFile file(data, size);
  loupe::PerfMap map(file.path());
  if (!map.refresh()) __builtin_trap();  // the file exists
  // Probe addresses: the first bytes as numbers, plus the edges of 64-bit space.
  std::uint64_t probes[8] = {0, 1, UINT64_MAX, UINT64_MAX - 1, 0x1000, 0x7f0000000000};
  if (size >= 16) std::memcpy(&probes[6], data, 16);
  for (std::uint64_t addr : probes) {
    loupe::PerfMap::Hit hit{};
    if (!map.lookup(addr, &hit)) continue;
    // The name is one parsed, non-empty name, and the hit lies in its range.
    if (hit.name.empty() || hit.name.find('\n') != std::string::npos || hit.offset > addr)
      __builtin_trap();
    if (!hit.interned) __builtin_trap();
  }
  return 0;
}
