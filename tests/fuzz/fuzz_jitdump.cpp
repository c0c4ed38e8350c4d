// SPDX-License-Identifier: Apache-2.0
//
// Fuzzes the jitdump reader (jit-PID.dump, written by the profiled program's JIT: untrusted)
// the way the symbolizer uses it: the file is read in two steps, as a runtime appending to
// it would be seen (a cut chosen by the input), then probed. Every hit must lie inside an
// entry of bounded name length, and the table must stay within its bound.
#include <cstdint>
#include <cstring>
#include <string>

#include "fuzz_file.hpp"
#include "symbols/jitdump.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size < 2) return 0;
  // First byte: where the first read stops (a fraction of the file); second: the bound.
  std::size_t cut = (size - 2) * data[0] / 255;
  std::size_t max_entries = 1 + data[1] % 16;
  data += 2;
  size -= 2;
  FuzzFile file(data, cut);
  loupe::JitDump dump(file.path(), max_entries);
  if (!dump.refresh()) __builtin_trap();  // the file exists
  if (::pwrite(file.fd(), data + cut, size - cut, static_cast<off_t>(cut)) !=
      static_cast<ssize_t>(size - cut))
    __builtin_trap();
  if (!dump.refresh()) __builtin_trap();
  if (dump.size() > max_entries || dump.offset() > size) __builtin_trap();
  // Probes: addresses from the input, and the edges of 64-bit space.
  std::uint64_t probes[12] = {0, 1, UINT64_MAX, UINT64_MAX - 1, 0x1000, 0x7f0000000000};
  for (std::size_t i = 0; i < 6 && 72 + 8 * i + 8 <= size; ++i)
    std::memcpy(&probes[6 + i], data + 72 + 8 * i, 8);
  for (std::uint64_t addr : probes) {
    loupe::JitDump::Hit hit{};
    if (!dump.lookup(addr, &hit)) continue;
    if (hit.name.empty() || hit.name.size() > loupe::JitDump::kMaxNameLength || hit.offset > addr ||
        !hit.interned || hit.name.find('\0') != std::string::npos)
      __builtin_trap();
  }
  return 0;
}
