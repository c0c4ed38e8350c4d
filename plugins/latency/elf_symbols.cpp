// SPDX-License-Identifier: Apache-2.0
#include "elf_symbols.hpp"

#include <fcntl.h>
#include <gelf.h>
#include <libelf.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <optional>
#include <stdexcept>

namespace loupe::latency {
namespace {

class ElfFile {
 public:
  explicit ElfFile(const std::string& path) : path_(path) {
    if (elf_version(EV_CURRENT) == EV_NONE) throw std::runtime_error("libelf: version mismatch");
    fd_ = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd_ < 0)
      throw std::runtime_error("cannot open '" + path + "': " + std::strerror(errno));
    elf_ = elf_begin(fd_, ELF_C_READ, nullptr);
    if (!elf_ || elf_kind(elf_) != ELF_K_ELF) {
      close();
      throw std::runtime_error("'" + path + "' is not an ELF file");
    }
  }
  ~ElfFile() { close(); }
  ElfFile(const ElfFile&) = delete;
  ElfFile& operator=(const ElfFile&) = delete;

  Elf* get() const { return elf_; }

 private:
  void close() {
    if (elf_) elf_end(elf_);
    if (fd_ >= 0) ::close(fd_);
    elf_ = nullptr;
    fd_ = -1;
  }
  std::string path_;
  int fd_ = -1;
  Elf* elf_ = nullptr;
};

struct Candidate {
  GElf_Sym sym;
  bool dynsym;
};

// Searches one symbol table; a global/weak definition wins over a local one.
// .gnu.version of the dynamic symbols: entries with the hidden bit are old versions
// (memcpy@GLIBC_2.2.5) that callers linked today do not reach; memcpy@@GLIBC_2.14 is it.
Elf_Data* find_versym(Elf* elf) {
  for (Elf_Scn* scn = elf_nextscn(elf, nullptr); scn; scn = elf_nextscn(elf, scn)) {
    GElf_Shdr shdr;
    if (gelf_getshdr(scn, &shdr) && shdr.sh_type == SHT_GNU_versym) return elf_getdata(scn, nullptr);
  }
  return nullptr;
}

std::optional<Candidate> search_table(Elf* elf, Elf_Scn* scn, const GElf_Shdr& shdr,
                                      const std::string& symbol, bool dynsym, bool& undefined,
                                      bool& ifunc) {
  Elf_Data* data = elf_getdata(scn, nullptr);
  if (!data || shdr.sh_entsize == 0) return std::nullopt;
  Elf_Data* versym = dynsym ? find_versym(elf) : nullptr;
  std::size_t n = shdr.sh_size / shdr.sh_entsize;
  std::optional<Candidate> local;
  for (std::size_t i = 0; i < n; ++i) {
    GElf_Sym sym;
    if (!gelf_getsym(data, static_cast<int>(i), &sym)) continue;
    const char* name = elf_strptr(elf, shdr.sh_link, sym.st_name);
    if (!name || symbol != name) continue;
    GElf_Versym vs = 0;
    if (versym && gelf_getversym(versym, static_cast<int>(i), &vs) && (vs & 0x8000)) continue;
    if (sym.st_shndx == SHN_UNDEF) {
      undefined = true;
      continue;
    }
    int type = GELF_ST_TYPE(sym.st_info);
    if (type == STT_GNU_IFUNC) {
      ifunc = true;
      continue;
    }
    if (type != STT_FUNC) continue;
    int bind = GELF_ST_BIND(sym.st_info);
    if (bind == STB_GLOBAL || bind == STB_WEAK) return Candidate{sym, dynsym};
    if (!local) local = Candidate{sym, dynsym};
  }
  return local;
}

std::optional<std::uint64_t> vaddr_to_offset(Elf* elf, std::uint64_t vaddr) {
  std::size_t n = 0;
  if (elf_getphdrnum(elf, &n) != 0) return std::nullopt;
  for (std::size_t i = 0; i < n; ++i) {
    GElf_Phdr ph;
    if (!gelf_getphdr(elf, static_cast<int>(i), &ph) || ph.p_type != PT_LOAD) continue;
    if (!(ph.p_flags & PF_X)) continue;
    if (vaddr >= ph.p_vaddr && vaddr < ph.p_vaddr + ph.p_memsz)
      return vaddr - ph.p_vaddr + ph.p_offset;
  }
  return std::nullopt;
}

}  // namespace

ElfFunction find_elf_function(const std::string& path, const std::string& symbol,
                              std::uint64_t offset_in_function) {
  ElfFile file(path);
  Elf* elf = file.get();
  std::optional<Candidate> found;
  bool undefined = false, ifunc = false, has_symtab = false;
  // .symtab first: it has local (static) functions too; .dynsym survives stripping.
  for (Elf64_Word want : {SHT_SYMTAB, SHT_DYNSYM}) {
    for (Elf_Scn* scn = elf_nextscn(elf, nullptr); scn && !found; scn = elf_nextscn(elf, scn)) {
      GElf_Shdr shdr;
      if (!gelf_getshdr(scn, &shdr) || shdr.sh_type != want) continue;
      if (want == SHT_SYMTAB) has_symtab = true;
      found = search_table(elf, scn, shdr, symbol, want == SHT_DYNSYM, undefined, ifunc);
    }
    if (found) break;
  }
  const std::string what = "symbol '" + symbol + "' in " + path;
  if (!found) {
    if (ifunc)
      throw std::runtime_error(what + " is a GNU indirect function (IFUNC): its address is the "
                               "resolver, not the implementation; trace the implementation "
                               "symbol instead (e.g. __memcpy_avx_unaligned)");
    if (undefined)
      throw std::runtime_error(what + " is only referenced there, not defined: trace it in the "
                               "library that defines it (e.g. libc:" + symbol + ")");
    throw std::runtime_error(what + " not found" +
                             (has_symtab ? std::string(" (inlined, static and optimised away, "
                                                       "or misspelled?)")
                                         : std::string(" (the file is stripped: only exported "
                                                       "symbols are visible)")));
  }
  if (found->sym.st_size && offset_in_function >= found->sym.st_size)
    throw std::runtime_error(what + ": offset +" + std::to_string(offset_in_function) +
                             " is past the end of the function (size " +
                             std::to_string(found->sym.st_size) + ")");
  auto off = vaddr_to_offset(elf, found->sym.st_value + offset_in_function);
  if (!off)
  {
    char hex[32];
    std::snprintf(hex, sizeof(hex), "0x%llx",
                  static_cast<unsigned long long>(found->sym.st_value));
    throw std::runtime_error(what + ": address " + hex + " is in no executable segment");
  }
  return ElfFunction{found->sym.st_value, found->sym.st_size, *off, found->dynsym};
}

}  // namespace loupe::latency
