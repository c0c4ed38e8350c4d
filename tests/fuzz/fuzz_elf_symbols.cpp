// SPDX-License-Identifier: Apache-2.0
//
// Fuzzes the ELF symbol table loader on corrupted files: the bytes are an ELF file (the
// seed corpus holds real small executables, shared objects and stripped ones, which the
// fuzzer mutates: bogus section offsets and sizes, string table links, symbol counts,
// note sizes, program headers). Every loaded table is then used as the symbolizer does.
#include <cstdint>
#include <cstring>
#include <string>

#include "fuzz_file.hpp"
#include "symbols/elf_symbol_table.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  FuzzFile file(data, size);
  // A debug root that does not exist: the fuzzed build-id must not lead to reading
  // anything of the real system's /usr/lib/debug.
  auto loaded = loupe::ElfSymbolTable::load(file.fd(), "/nonexistent-loupe-fuzz");
  if (!loaded) {
    if (loaded.error().empty()) __builtin_trap();  // a refusal says why
    return 0;
  }
  const auto& table = loaded.value();
  std::uint64_t probes[6] = {0, 0x1000, 0x401000, UINT64_MAX};
  if (size >= 0x30) std::memcpy(&probes[4], data + 0x18, 16);  // e_entry and e_phoff
  for (std::uint64_t addr : probes) {
    for (const loupe::ElfSymbol* s : {table->find_function(addr), table->find_object(addr)}) {
      if (!s) continue;
      if (addr - s->addr >= s->size) __builtin_trap();
      volatile std::size_t n = table->name(*s).size();
      (void)n;
    }
    (void)table->bias_for(addr, addr & 0xffff);
  }
  for (char c : table->build_id())
    if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'))) __builtin_trap();
  (void)table->memory_bytes();
  return 0;
}
