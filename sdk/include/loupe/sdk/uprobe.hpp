// SPDX-License-Identifier: Apache-2.0
//
// A function symbol in an ELF file -> the file offset a uprobe attaches at (the kernel
// wants an offset into the file, not a virtual address), with the reason when it cannot
// be traced. Resolving the offset here instead of passing func_name to libbpf also works
// where libbpf 1.1 refuses: a name .dynsym lists under two symbol versions at one address
// (glibc's pthread_rwlock_rdlock@GLIBC_2.2.5 and @@GLIBC_2.34).
//
//   std::string libc = sdk::locate_library(pid, "libc");             // library.hpp
//   std::uint64_t off = sdk::find_elf_function(libc, "malloc").file_offset;
//   bpf_program__attach_uprobe_opts(prog, pid ? pid : -1, libc.c_str(), off, &opts);
//
// Needs libelf: link the plugin with it (in CMake: pkg_check_modules(LIBELF REQUIRED
// IMPORTED_TARGET libelf) and loupe_add_plugin(... LIBS PkgConfig::LIBELF)).
#ifndef LOUPE_SDK_UPROBE_HPP
#define LOUPE_SDK_UPROBE_HPP

#include <fcntl.h>
#include <gelf.h>
#include <libelf.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <optional>
#include <string>
#include <vector>

#include "loupe/sdk/library.hpp"
#include "loupe/sdk/plugin.hpp"

namespace loupe::sdk {

// How the kernel names a uprobe's target ("uprobe:/usr/lib/.../libc.so.6+0x98930"), for
// Host::adopt_link(..., target).
inline std::string uprobe_target(const std::string& path, std::uint64_t file_offset,
                                 bool retprobe) {
  char off[32];
  std::snprintf(off, sizeof(off), "+0x%llx", static_cast<unsigned long long>(file_offset));
  return (retprobe ? "uretprobe:" : "uprobe:") + path + off;
}

struct ElfFunction {
  std::uint64_t address = 0;      // st_value
  std::uint64_t size = 0;         // st_size
  std::uint64_t file_offset = 0;  // where uprobes attach
  bool from_dynsym = false;       // only .dynsym had it (stripped binary)
};

namespace detail {

class ElfFile {
 public:
  explicit ElfFile(const std::string& path) {
    if (elf_version(EV_CURRENT) == EV_NONE)
      throw Error(LOUPE_ERR_INTERNAL, "libelf: version mismatch");
    fd_ = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd_ < 0)
      throw Error(LOUPE_ERR_NOT_FOUND, "cannot open '" + path + "': " + std::strerror(errno));
    elf_ = elf_begin(fd_, ELF_C_READ, nullptr);
    if (!elf_ || elf_kind(elf_) != ELF_K_ELF) {
      close();
      throw Error(LOUPE_ERR_INVALID_ARG, "'" + path + "' is not an ELF file");
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
  int fd_ = -1;
  Elf* elf_ = nullptr;
};

struct ElfCandidate {
  GElf_Sym sym;
  bool dynsym;
};

struct ElfSearch {
  bool undefined = false;  // only an undefined reference was seen
  bool ifunc = false;      // only a GNU indirect function was seen
};

// .gnu.version of the dynamic symbols: entries with the hidden bit are old versions
// (memcpy@GLIBC_2.2.5) that callers linked today do not reach; memcpy@@GLIBC_2.14 is it.
inline Elf_Data* find_versym(Elf* elf) {
  for (Elf_Scn* scn = elf_nextscn(elf, nullptr); scn; scn = elf_nextscn(elf, scn)) {
    GElf_Shdr shdr;
    if (gelf_getshdr(scn, &shdr) && shdr.sh_type == SHT_GNU_versym)
      return elf_getdata(scn, nullptr);
  }
  return nullptr;
}

// True when `name`, as a symbol table spells it, is `symbol` or its default version
// ("f@@V", as .symtab may spell it). An old version ("f@V": memcpy@GLIBC_2.2.5) is not
// what callers linked today reach.
inline bool name_matches(const char* name, const std::string& symbol) {
  if (std::strncmp(name, symbol.c_str(), symbol.size()) != 0) return false;
  const char* rest = name + symbol.size();
  return *rest == '\0' || std::strncmp(rest, "@@", 2) == 0;
}

// Searches one symbol table: a global/weak definition wins over a local one.
inline std::optional<ElfCandidate> search_table(Elf* elf, Elf_Scn* scn, const GElf_Shdr& shdr,
                                                const std::string& symbol, bool dynsym,
                                                ElfSearch& seen) {
  Elf_Data* data = elf_getdata(scn, nullptr);
  if (!data || shdr.sh_entsize == 0) return std::nullopt;
  Elf_Data* versym = dynsym ? find_versym(elf) : nullptr;
  std::size_t n = shdr.sh_size / shdr.sh_entsize;
  std::optional<ElfCandidate> local;
  for (std::size_t i = 0; i < n; ++i) {
    GElf_Sym sym;
    if (!gelf_getsym(data, static_cast<int>(i), &sym)) continue;
    const char* name = elf_strptr(elf, shdr.sh_link, sym.st_name);
    if (!name || !name_matches(name, symbol)) continue;
    GElf_Versym vs = 0;
    if (versym && gelf_getversym(versym, static_cast<int>(i), &vs) && (vs & 0x8000)) continue;
    if (sym.st_shndx == SHN_UNDEF) {
      seen.undefined = true;
      continue;
    }
    int type = GELF_ST_TYPE(sym.st_info);
    if (type == STT_GNU_IFUNC) {
      seen.ifunc = true;
      continue;
    }
    if (type != STT_FUNC) continue;
    int bind = GELF_ST_BIND(sym.st_info);
    if (bind == STB_GLOBAL || bind == STB_WEAK) return ElfCandidate{sym, dynsym};
    if (!local) local = ElfCandidate{sym, dynsym};
  }
  return local;
}

inline std::optional<std::uint64_t> vaddr_to_offset(Elf* elf, std::uint64_t vaddr) {
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

}  // namespace detail

// Finds the function `symbol` in the ELF file `path` (.symtab first: it has static
// functions too; then .dynsym, which survives stripping) and the file offset of
// `offset_in_function` bytes into it. Throws Error(NOT_FOUND) naming the file, the symbol
// and the likely cause: absent, stripped, only referenced there, an IFUNC resolver, the
// offset past the end of the function.
inline ElfFunction find_elf_function(const std::string& path, const std::string& symbol,
                                     std::uint64_t offset_in_function = 0) {
  detail::ElfFile file(path);
  Elf* elf = file.get();
  std::optional<detail::ElfCandidate> found;
  detail::ElfSearch seen;
  bool has_symtab = false;
  for (Elf64_Word want : {SHT_SYMTAB, SHT_DYNSYM}) {
    for (Elf_Scn* scn = elf_nextscn(elf, nullptr); scn && !found; scn = elf_nextscn(elf, scn)) {
      GElf_Shdr shdr;
      if (!gelf_getshdr(scn, &shdr) || shdr.sh_type != want) continue;
      if (want == SHT_SYMTAB) has_symtab = true;
      found = detail::search_table(elf, scn, shdr, symbol, want == SHT_DYNSYM, seen);
    }
    if (found) break;
  }
  const std::string what = "symbol '" + symbol + "' in " + path;
  if (!found) {
    if (seen.ifunc)
      throw Error(LOUPE_ERR_NOT_FOUND,
                  what +
                      " is a GNU indirect function (IFUNC): its address is the resolver, not "
                      "the implementation; trace the implementation symbol instead (e.g. "
                      "__memcpy_avx_unaligned)");
    if (seen.undefined)
      throw Error(LOUPE_ERR_NOT_FOUND, what +
                                           " is only referenced there, not defined: trace it "
                                           "in the library that defines it (e.g. libc:" +
                                           symbol + ")");
    throw Error(LOUPE_ERR_NOT_FOUND,
                what + " not found" +
                    (has_symtab ? std::string(" (inlined, static and optimised away, or "
                                              "misspelled?)")
                                : std::string(" (the file is stripped: only exported symbols "
                                              "are visible)")));
  }
  if (found->sym.st_size && offset_in_function >= found->sym.st_size)
    throw Error(LOUPE_ERR_NOT_FOUND, what + ": offset +" + std::to_string(offset_in_function) +
                                         " is past the end of the function (size " +
                                         std::to_string(found->sym.st_size) + ")");
  auto off = detail::vaddr_to_offset(elf, found->sym.st_value + offset_in_function);
  if (!off) {
    char hex[32];
    std::snprintf(hex, sizeof(hex), "0x%llx", static_cast<unsigned long long>(found->sym.st_value));
    throw Error(LOUPE_ERR_NOT_FOUND, what + ": address " + hex + " is in no executable segment");
  }
  return ElfFunction{found->sym.st_value, found->sym.st_size, *off, found->dynsym};
}

// A link-time address of an ELF file as a probe site is named: the function holding it
// (.symtab, else .dynsym; "" when no symbol covers it), the offset into that function, and
// the file offset a uprobe at it sits on (what a running process maps it at, less the
// mapping's start, plus its file offset). Naming a site from the file, when it is
// attached, keeps the name independent of any process that fired it still being alive.
struct ElfAddress {
  std::uint64_t vaddr = 0;
  std::optional<std::uint64_t> file_offset;  // none: the address is in no executable segment
  std::string function;
  std::uint64_t offset_in_function = 0;
  // "function+0xOFF", or "0xVADDR" when no symbol covers it.
  std::string site() const {
    char off[32];
    std::snprintf(off, sizeof(off), "%s0x%llx", function.empty() ? "" : "+",
                  static_cast<unsigned long long>(function.empty() ? vaddr : offset_in_function));
    return function + off;
  }
};

// Describes every address of `vaddrs` (link-time, as USDT notes and symbols give them) in
// one pass over the file's symbol tables. Throws Error as find_elf_function().
inline std::vector<ElfAddress> describe_elf_addresses(const std::string& path,
                                                      const std::vector<std::uint64_t>& vaddrs) {
  detail::ElfFile file(path);
  Elf* elf = file.get();
  std::vector<ElfAddress> out(vaddrs.size());
  std::vector<bool> sized(vaddrs.size(), false);  // a sized symbol beats a zero-sized one
  for (std::size_t i = 0; i < vaddrs.size(); ++i) {
    out[i].vaddr = vaddrs[i];
    out[i].file_offset = detail::vaddr_to_offset(elf, vaddrs[i]);
  }
  for (Elf64_Word want : {SHT_SYMTAB, SHT_DYNSYM}) {
    for (Elf_Scn* scn = elf_nextscn(elf, nullptr); scn; scn = elf_nextscn(elf, scn)) {
      GElf_Shdr shdr;
      if (!gelf_getshdr(scn, &shdr) || shdr.sh_type != want || shdr.sh_entsize == 0) continue;
      Elf_Data* data = elf_getdata(scn, nullptr);
      std::size_t n = data ? shdr.sh_size / shdr.sh_entsize : 0;
      for (std::size_t j = 0; j < n; ++j) {
        GElf_Sym sym;
        if (!gelf_getsym(data, static_cast<int>(j), &sym) || sym.st_shndx == SHN_UNDEF ||
            GELF_ST_TYPE(sym.st_info) != STT_FUNC)
          continue;
        for (std::size_t i = 0; i < vaddrs.size(); ++i) {
          const std::uint64_t v = vaddrs[i];
          bool covers =
              sym.st_size ? v >= sym.st_value && v < sym.st_value + sym.st_size : v == sym.st_value;
          if (!covers || sized[i] || (!sym.st_size && !out[i].function.empty())) continue;
          const char* name = elf_strptr(elf, shdr.sh_link, sym.st_name);
          if (!name || !*name) continue;
          std::string fn = name;
          if (auto at = fn.find('@'); at != std::string::npos) fn.resize(at);
          out[i].function = fn;
          out[i].offset_in_function = v - sym.st_value;
          sized[i] = sym.st_size != 0;
        }
      }
    }
    // .dynsym only where .symtab left an address unnamed (a stripped file has no .symtab).
    if (std::all_of(out.begin(), out.end(),
                    [](const ElfAddress& a) { return !a.function.empty(); }))
      break;
  }
  return out;
}

}  // namespace loupe::sdk

#endif  // LOUPE_SDK_UPROBE_HPP
