// SPDX-License-Identifier: Apache-2.0
#include "process_memory.hpp"

#include <sys/uio.h>

#include "symbols/elf_file.hpp"

namespace loupe {

bool read_process_memory(std::uint32_t pid, std::uint64_t addr, void* out, std::size_t len) {
  iovec local{out, len};
  iovec remote{reinterpret_cast<void*>(addr), len};
  return ::process_vm_readv(static_cast<pid_t>(pid), &local, 1, &remote, 1, 0) ==
         static_cast<ssize_t>(len);
}

ElfSymbolValues elf_symbol_values(const std::string& path,
                                  std::initializer_list<std::string_view> prefixes, bool symtab) {
  ElfSymbolValues out;
  const ElfFile file(path);
  Elf* elf = file.get();
  if (!elf) return out;
  GElf_Ehdr eh;
  if (file.header(&eh)) {
    out.read = true;
    out.executable = eh.e_type == ET_EXEC;
  }
  Elf_Scn* scn = nullptr;
  while ((scn = elf_nextscn(elf, scn)) != nullptr) {
    GElf_Shdr sh;
    if (!gelf_getshdr(scn, &sh) || sh.sh_entsize == 0 ||
        !(sh.sh_type == SHT_DYNSYM || (symtab && sh.sh_type == SHT_SYMTAB)))
      continue;
    Elf_Data* data = elf_getdata(scn, nullptr);
    for (std::size_t i = 0; data && i < sh.sh_size / sh.sh_entsize; ++i) {
      GElf_Sym sym;
      if (!gelf_getsym(data, static_cast<int>(i), &sym) || sym.st_shndx == SHN_UNDEF) continue;
      const char* name = elf_strptr(elf, sh.sh_link, sym.st_name);
      if (!name) continue;
      const std::string_view n(name);
      bool wanted = false;
      for (std::string_view p : prefixes) wanted |= n.substr(0, p.size()) == p;
      if (!wanted) continue;
      out.address.emplace(name, sym.st_value);
      out.size.emplace(name, sym.st_size);
    }
  }
  return out;
}

}  // namespace loupe
