// SPDX-License-Identifier: Apache-2.0
//
// File:line and inlined frames of one ELF file from its DWARF (.debug_info/.debug_line),
// or from its separate debug file found by build-id. Keeps the file open while cached,
// so it is opened only for files whose source lines are asked for. Without libdw in the
// build (LOUPE_HAVE_LIBDW unset) it finds nothing.
#ifndef LOUPE_SYMBOLS_ELF_DWARF_LINES_HPP
#define LOUPE_SYMBOLS_ELF_DWARF_LINES_HPP

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace loupe {

struct DwarfSourceFrame {
  std::string function;  // DWARF name of the (inlined) function; may be empty
  std::string file;
  std::uint32_t line = 0;
  bool inlined = false;  // an inlined call; the next entry is its caller
};

class ElfDwarfLines {
 public:
  // Takes ownership of `fd`. Returns nullptr when neither the file nor its debug file
  // (<debug_root>/usr/lib/debug/.build-id/xx/yyyy.debug) has DWARF.
  static std::unique_ptr<ElfDwarfLines> open(int fd, const std::string& build_id,
                                             const std::string& debug_root);
  ~ElfDwarfLines();
  ElfDwarfLines(const ElfDwarfLines&) = delete;
  ElfDwarfLines& operator=(const ElfDwarfLines&) = delete;

  // Source frames of link-time address `vaddr`, innermost (inlined) first, the function
  // that holds the code last. Empty when the DWARF does not cover it.
  std::vector<DwarfSourceFrame> lookup(std::uint64_t vaddr) const;

 private:
  ElfDwarfLines(int fd, void* dwarf) : fd_(fd), dwarf_(dwarf) {}
  int fd_;
  void* dwarf_;  // Dwarf*, kept opaque so this header does not need libdw
};

}  // namespace loupe

#endif  // LOUPE_SYMBOLS_ELF_DWARF_LINES_HPP
