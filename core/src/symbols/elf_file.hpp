// SPDX-License-Identifier: Apache-2.0
//
// One ELF file open for reading: its descriptor and libelf's handle (the file mmapped),
// released together. Every reader of ELF files in loupe opens them here (symbol tables,
// unwind tables, the runtimes' layouts, the preflight's own entry point), so libelf is
// initialised once and no early return leaks a handle. Not thread-safe per object; libelf
// allows one object per thread.
#ifndef LOUPE_SYMBOLS_ELF_FILE_HPP
#define LOUPE_SYMBOLS_ELF_FILE_HPP

#include <gelf.h>
#include <libelf.h>

#include <string>
#include <vector>

#include "symbols/eh_frame_ranges.hpp"

namespace loupe {

class ElfFile {
 public:
  // Opens `path`. valid() false when it cannot be opened or is no ELF file; error() says
  // which ("open: No such file or directory", "not an ELF file").
  explicit ElfFile(const std::string& path);
  // Reads the file open on `fd`, which the caller keeps and closes (after this object).
  static ElfFile borrow(int fd);
  ~ElfFile();
  ElfFile(ElfFile&& other) noexcept;
  ElfFile& operator=(ElfFile&&) = delete;
  ElfFile(const ElfFile&) = delete;
  ElfFile& operator=(const ElfFile&) = delete;

  bool valid() const { return elf_ != nullptr; }
  const std::string& error() const { return error_; }
  Elf* get() const { return elf_; }
  int fd() const { return fd_; }
  // The ELF header; false when it cannot be read.
  bool header(GElf_Ehdr* out) const { return elf_ && gelf_getehdr(elf_, out) != nullptr; }
  // The function ranges of its .eh_frame (empty without one): where a stripped file's
  // functions start and end, and what the unwind tables are built over.
  std::vector<FdeRange> eh_frame_ranges() const;

 private:
  ElfFile() = default;
  void begin();

  int fd_ = -1;
  bool owns_fd_ = false;
  Elf* elf_ = nullptr;
  std::string error_;
};

}  // namespace loupe

#endif  // LOUPE_SYMBOLS_ELF_FILE_HPP
