// SPDX-License-Identifier: Apache-2.0
#include "elf_function_offset.hpp"

#include <fcntl.h>
#include <gelf.h>
#include <libelf.h>
#include <unistd.h>

#include <cstring>

namespace loupe::lockwait {
namespace {

std::uint64_t find(Elf* elf, const std::string& name) {
  std::uint64_t vaddr = 0;
  Elf_Scn* scn = nullptr;
  while (!vaddr && (scn = elf_nextscn(elf, scn)) != nullptr) {
    GElf_Shdr sh;
    if (!gelf_getshdr(scn, &sh) || (sh.sh_type != SHT_DYNSYM && sh.sh_type != SHT_SYMTAB))
      continue;
    Elf_Data* data = elf_getdata(scn, nullptr);
    if (!data || sh.sh_entsize == 0) continue;
    for (std::size_t i = 0; i < sh.sh_size / sh.sh_entsize; ++i) {
      GElf_Sym sym;
      if (!gelf_getsym(data, static_cast<int>(i), &sym) || GELF_ST_TYPE(sym.st_info) != STT_FUNC ||
          sym.st_value == 0)
        continue;
      const char* n = elf_strptr(elf, sh.sh_link, sym.st_name);
      if (!n) continue;
      // .symtab may spell the version into the name: "pthread_rwlock_rdlock@@GLIBC_2.34".
      std::size_t len = std::strcspn(n, "@");
      if (len == name.size() && std::strncmp(n, name.c_str(), len) == 0) {
        vaddr = sym.st_value;
        break;
      }
    }
  }
  if (!vaddr) return 0;
  std::size_t nph = 0;
  if (elf_getphdrnum(elf, &nph) != 0) return 0;
  for (std::size_t i = 0; i < nph; ++i) {
    GElf_Phdr ph;
    if (gelf_getphdr(elf, static_cast<int>(i), &ph) && ph.p_type == PT_LOAD &&
        (ph.p_flags & PF_X) && vaddr >= ph.p_vaddr && vaddr < ph.p_vaddr + ph.p_memsz)
      return vaddr - ph.p_vaddr + ph.p_offset;
  }
  return 0;
}

}  // namespace

std::uint64_t elf_function_offset(const std::string& path, const std::string& name) {
  if (elf_version(EV_CURRENT) == EV_NONE) return 0;
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return 0;
  Elf* elf = elf_begin(fd, ELF_C_READ, nullptr);
  std::uint64_t off = elf ? find(elf, name) : 0;
  if (elf) elf_end(elf);
  ::close(fd);
  return off;
}

}  // namespace loupe::lockwait
