// SPDX-License-Identifier: Apache-2.0
//
// Fuzzes the kallsyms parser on arbitrary text (both symbol kinds) and looks up
// addresses from the input and the edges of 64-bit space; every hit's strings are read.
#include <cstdint>
#include <cstring>
#include <string>

#include "fuzz_file.hpp"
#include "symbols/kallsyms_table.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  FuzzFile file(data, size);
  std::uint64_t probes[6] = {0, 1, UINT64_MAX, 0xffffffff81000000ull};
  if (size >= 16) std::memcpy(&probes[4], data, 16);
  for (auto kind : {loupe::KallsymsTable::Kind::kText, loupe::KallsymsTable::Kind::kData}) {
    loupe::KallsymsTable table(file.path(), kind);
    if (table.size() == 0 && table.empty_reason().empty() && size > 0) {
      // An empty table must say why, unless the text simply held no symbols of that kind
      // (then the reason says so too); so: always a reason.
      __builtin_trap();
    }
    for (std::uint64_t addr : probes) {
      bool in_kernel = false;
      loupe::KernelSymbol s = table.lookup(addr, &in_kernel);
      if (s.name == nullptr) continue;
      if (!in_kernel || s.module == nullptr || s.offset > addr) __builtin_trap();
      volatile std::size_t n = std::strlen(s.name) + std::strlen(s.module);
      (void)n;
    }
  }
  return 0;
}
