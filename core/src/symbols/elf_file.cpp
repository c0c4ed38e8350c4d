// SPDX-License-Identifier: Apache-2.0
#include "symbols/elf_file.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <mutex>

namespace loupe {

ElfFile::ElfFile(const std::string& path) {
  fd_ = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd_ < 0) {
    error_ = std::string("open: ") + std::strerror(errno);
    return;
  }
  owns_fd_ = true;
  begin();
}

ElfFile ElfFile::borrow(int fd) {
  ElfFile f;
  f.fd_ = fd;
  f.begin();
  return f;
}

void ElfFile::begin() {
  static std::once_flag once;
  std::call_once(once, [] { elf_version(EV_CURRENT); });
  elf_ = elf_begin(fd_, ELF_C_READ_MMAP, nullptr);
  if (elf_ && elf_kind(elf_) != ELF_K_ELF) {
    elf_end(elf_);
    elf_ = nullptr;
  }
  if (!elf_) error_ = "not an ELF file";
}

ElfFile::ElfFile(ElfFile&& other) noexcept
    : fd_(other.fd_), owns_fd_(other.owns_fd_), elf_(other.elf_), error_(std::move(other.error_)) {
  other.fd_ = -1;
  other.owns_fd_ = false;
  other.elf_ = nullptr;
}

std::vector<FdeRange> ElfFile::eh_frame_ranges() const {
  std::size_t shstrndx = 0;
  if (!elf_ || elf_getshdrstrndx(elf_, &shstrndx) != 0) return {};
  for (Elf_Scn* scn = elf_nextscn(elf_, nullptr); scn; scn = elf_nextscn(elf_, scn)) {
    GElf_Shdr sh;
    if (!gelf_getshdr(scn, &sh) || sh.sh_type == SHT_NOBITS) continue;
    const char* name = elf_strptr(elf_, shstrndx, sh.sh_name);
    if (!name || std::strcmp(name, ".eh_frame") != 0) continue;
    Elf_Data* data = elf_rawdata(scn, nullptr);
    if (!data || !data->d_buf) return {};
    return parse_eh_frame_ranges(static_cast<const std::uint8_t*>(data->d_buf), data->d_size,
                                 sh.sh_addr);
  }
  return {};
}

ElfFile::~ElfFile() {
  if (elf_) elf_end(elf_);
  if (owns_fd_ && fd_ >= 0) ::close(fd_);
}

}  // namespace loupe
