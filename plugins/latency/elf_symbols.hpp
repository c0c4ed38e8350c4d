// SPDX-License-Identifier: Apache-2.0
//
// Finds a function symbol in an ELF file and turns its address into the file offset
// uprobes attach at (the kernel wants an offset into the file, not a virtual address).
#ifndef LOUPE_LATENCY_ELF_SYMBOLS_HPP
#define LOUPE_LATENCY_ELF_SYMBOLS_HPP

#include <cstdint>
#include <string>

namespace loupe::latency {

struct ElfFunction {
  std::uint64_t address = 0;      // st_value
  std::uint64_t size = 0;         // st_size
  std::uint64_t file_offset = 0;  // where uprobes attach
  bool from_dynsym = false;       // only .dynsym had it (stripped binary)
};

// Throws std::runtime_error with the file, the symbol and the likely cause (absent,
// stripped, undefined here, an IFUNC resolver, offset past the end of the function).
ElfFunction find_elf_function(const std::string& path, const std::string& symbol,
                              std::uint64_t offset_in_function = 0);

}  // namespace loupe::latency

#endif  // LOUPE_LATENCY_ELF_SYMBOLS_HPP
