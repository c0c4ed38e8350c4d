// SPDX-License-Identifier: Apache-2.0
//
// What the runtimes read of another process: its memory (process_vm_readv: no ptrace
// stop, no signal) and the symbols of the file that holds the runtime (the values a VM
// exports for debuggers: libjvm's gHotSpotVMStructs, node's v8dbg_*). Shared by every
// runtime's folder; any thread.
#ifndef LOUPE_RUNTIMES_PROCESS_MEMORY_HPP
#define LOUPE_RUNTIMES_PROCESS_MEMORY_HPP

#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <map>
#include <string>
#include <string_view>

namespace loupe {

// Reads `len` bytes at `addr` of process `pid`; false unless all of them were read.
bool read_process_memory(std::uint32_t pid, std::uint64_t addr, void* out, std::size_t len);

// A value of type T at `addr`; *ok becomes false (and stays so) when it cannot be read.
template <typename T>
T read_process_value(std::uint32_t pid, std::uint64_t addr, bool* ok) {
  T v{};
  if (!read_process_memory(pid, addr, &v, sizeof(v))) *ok = false;
  return v;
}

// The symbols of an ELF file whose names start with one of `prefixes` (.dynsym, and .symtab
// when `symtab` too), by name: link-time addresses and sizes. `executable`: the file is
// ET_EXEC, loaded at its link-time addresses (bias 0); otherwise at the start of its
// mapping of offset 0.
struct ElfSymbolValues {
  bool read = false;  // the file was opened and parsed
  bool executable = false;
  std::map<std::string, std::uint64_t, std::less<>> address, size;
};
ElfSymbolValues elf_symbol_values(const std::string& path,
                                  std::initializer_list<std::string_view> prefixes,
                                  bool symtab = false);

}  // namespace loupe

#endif  // LOUPE_RUNTIMES_PROCESS_MEMORY_HPP
