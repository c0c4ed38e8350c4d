// SPDX-License-Identifier: Apache-2.0
#include "symbols/elf_dwarf_lines.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <cstdlib>

#ifdef LOUPE_HAVE_LIBDW
#include <dwarf.h>
#include <elfutils/libdw.h>
#endif

namespace loupe {

#ifdef LOUPE_HAVE_LIBDW
namespace {

Dwarf* begin_dwarf(int fd) {
  Dwarf* d = dwarf_begin(fd, DWARF_C_READ);
  if (!d) return nullptr;
  // A file with only .debug_frame or a stripped .debug_info is no help for lines.
  Dwarf_Off off = 0, next = 0;
  std::size_t hsize = 0;
  if (dwarf_nextcu(d, off, &next, &hsize, nullptr, nullptr, nullptr) != 0) {
    dwarf_end(d);
    return nullptr;
  }
  return d;
}

// The compilation unit holding `addr`: .debug_aranges first, then every CU's ranges
// (some toolchains emit no aranges).
bool find_cu(Dwarf* d, Dwarf_Addr addr, Dwarf_Die* cu) {
  if (dwarf_addrdie(d, addr, cu)) return true;
  Dwarf_Off off = 0, next = 0;
  std::size_t hsize = 0;
  while (dwarf_nextcu(d, off, &next, &hsize, nullptr, nullptr, nullptr) == 0) {
    if (dwarf_offdie(d, off + hsize, cu) && dwarf_haspc(cu, addr) > 0) return true;
    off = next;
  }
  return false;
}

std::uint64_t udata(Dwarf_Die* die, unsigned attr_name) {
  Dwarf_Attribute attr;
  Dwarf_Word v = 0;
  if (!dwarf_attr_integrate(die, attr_name, &attr) || dwarf_formudata(&attr, &v) != 0) return 0;
  return v;
}

std::string call_file(Dwarf_Die* cu, Dwarf_Die* inlined) {
  Dwarf_Files* files = nullptr;
  std::size_t n = 0;
  std::uint64_t idx = udata(inlined, DW_AT_call_file);
  if (dwarf_getsrcfiles(cu, &files, &n) != 0 || idx >= n) return {};
  const char* f = dwarf_filesrc(files, idx, nullptr, nullptr);
  return f ? f : "";
}

}  // namespace

std::unique_ptr<ElfDwarfLines> ElfDwarfLines::open(int fd, const std::string& build_id,
                                                   const std::string& debug_root) {
  if (Dwarf* d = begin_dwarf(fd)) return std::unique_ptr<ElfDwarfLines>(new ElfDwarfLines(fd, d));
  ::close(fd);
  if (build_id.size() <= 2) return nullptr;
  std::string path = debug_root + "/usr/lib/debug/.build-id/" + build_id.substr(0, 2) + "/" +
                     build_id.substr(2) + ".debug";
  int dbg = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (dbg < 0) return nullptr;
  if (Dwarf* d = begin_dwarf(dbg)) return std::unique_ptr<ElfDwarfLines>(new ElfDwarfLines(dbg, d));
  ::close(dbg);
  return nullptr;
}

ElfDwarfLines::~ElfDwarfLines() {
  dwarf_end(static_cast<Dwarf*>(dwarf_));
  ::close(fd_);
}

std::vector<DwarfSourceFrame> ElfDwarfLines::lookup(std::uint64_t vaddr) const {
  std::vector<DwarfSourceFrame> out;
  auto* d = static_cast<Dwarf*>(dwarf_);
  Dwarf_Die cu;
  if (!find_cu(d, vaddr, &cu)) return out;
  Dwarf_Line* line = dwarf_getsrc_die(&cu, vaddr);
  if (!line) return out;
  const char* src = dwarf_linesrc(line, nullptr, nullptr);
  int lineno = 0;
  dwarf_lineno(line, &lineno);
  std::string file = src ? src : "";
  auto at = static_cast<std::uint32_t>(lineno);
  // Scopes run innermost first: each inlined subroutine is a frame at the current
  // location, and its call site is where its caller stands.
  Dwarf_Die* scopes = nullptr;
  int n = dwarf_getscopes(&cu, vaddr, &scopes);
  // dwarf_getscopes continues past an inlined instance into its abstract definition;
  // the callers are the concrete DIEs around it, which dwarf_getscopes_die walks.
  // That walk starts at the CU root, so it is paid only when something was inlined.
  bool has_inlined = false;
  for (int i = 0; i < n && !has_inlined; ++i)
    has_inlined = dwarf_tag(&scopes[i]) == DW_TAG_inlined_subroutine;
  if (has_inlined) {
    Dwarf_Die* concrete = nullptr;
    int m = dwarf_getscopes_die(&scopes[0], &concrete);
    std::free(scopes);
    scopes = concrete;
    n = m;
  }
  for (int i = 0; i < n; ++i) {
    int tag = dwarf_tag(&scopes[i]);
    if (tag != DW_TAG_inlined_subroutine && tag != DW_TAG_subprogram) continue;
    const char* name = dwarf_diename(&scopes[i]);
    bool inlined = tag == DW_TAG_inlined_subroutine;
    out.push_back({name ? name : "", file, at, inlined});
    if (!inlined) break;
    file = call_file(&cu, &scopes[i]);
    at = static_cast<std::uint32_t>(udata(&scopes[i], DW_AT_call_line));
  }
  std::free(scopes);
  if (out.empty()) out.push_back({"", file, at, false});
  return out;
}

#else  // !LOUPE_HAVE_LIBDW

std::unique_ptr<ElfDwarfLines> ElfDwarfLines::open(int fd, const std::string&, const std::string&) {
  ::close(fd);
  return nullptr;
}
ElfDwarfLines::~ElfDwarfLines() {
  ::close(fd_);
}
std::vector<DwarfSourceFrame> ElfDwarfLines::lookup(std::uint64_t) const {
  return {};
}

#endif

}  // namespace loupe
