// SPDX-License-Identifier: Apache-2.0
//
// The USDT (SystemTap SDT) probes an ELF file ships: its .note.stapsdt notes, read to
// tell a user what a binary offers (`loupe probes BINARY`) and why a probe name is
// refused, before libbpf attaches (bpf_program__attach_usdt reads the same notes).
//
//   for (const auto& p : sdk::read_usdt_probes("/usr/bin/python3.11"))
//     std::printf("%s:%s %zu args\n", p.provider.c_str(), p.name.c_str(), p.arg_count());
//
// Needs libelf (as uprobe.hpp).
#ifndef LOUPE_SDK_USDT_HPP
#define LOUPE_SDK_USDT_HPP

#include <fcntl.h>
#include <gelf.h>
#include <libelf.h>
#include <unistd.h>

#include <cstdint>
#include <cstring>
#include <stdexcept>
#include <string>
#include <vector>

namespace loupe::sdk {

struct UsdtProbe {
  std::string provider;
  std::string name;
  std::uint64_t pc = 0;         // link-time address of the site
  std::uint64_t semaphore = 0;  // link-time address of its enable counter; 0 = none
  std::string args;             // as the note spells them: "-4@%eax 8@%rbx"

  // One entry per argument: "-4@%eax" (signed 4 bytes in eax).
  std::vector<std::string> arg_specs() const {
    std::vector<std::string> out;
    std::size_t i = 0;
    while (i < args.size()) {
      while (i < args.size() && args[i] == ' ') ++i;
      std::size_t j = args.find(' ', i);
      if (j == std::string::npos) j = args.size();
      if (j > i) out.push_back(args.substr(i, j - i));
      i = j;
    }
    return out;
  }
  std::size_t arg_count() const { return arg_specs().size(); }
};

// Every probe site of `path`, in note order (one name may have several sites). Throws
// std::runtime_error when the file is not readable ELF; a file without notes gives {}.
inline std::vector<UsdtProbe> read_usdt_probes(const std::string& path) {
  elf_version(EV_CURRENT);
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) throw std::runtime_error("cannot open " + path + ": " + std::strerror(errno));
  Elf* elf = elf_begin(fd, ELF_C_READ, nullptr);
  if (!elf || elf_kind(elf) != ELF_K_ELF) {
    if (elf) elf_end(elf);
    ::close(fd);
    throw std::runtime_error(path + " is not an ELF file");
  }
  std::size_t shstrndx = 0;
  elf_getshdrstrndx(elf, &shstrndx);
  // The notes hold addresses as linked; a prelinked file moved .stapsdt.base, and each
  // site moves with it (the SDT convention).
  std::uint64_t base_actual = 0;
  std::vector<UsdtProbe> out;
  for (Elf_Scn* scn = elf_nextscn(elf, nullptr); scn; scn = elf_nextscn(elf, scn)) {
    GElf_Shdr sh;
    if (!gelf_getshdr(scn, &sh)) continue;
    const char* name = elf_strptr(elf, shstrndx, sh.sh_name);
    if (name && std::strcmp(name, ".stapsdt.base") == 0) base_actual = sh.sh_addr;
  }
  for (Elf_Scn* scn = elf_nextscn(elf, nullptr); scn; scn = elf_nextscn(elf, scn)) {
    GElf_Shdr sh;
    if (!gelf_getshdr(scn, &sh) || sh.sh_type != SHT_NOTE) continue;
    const char* name = elf_strptr(elf, shstrndx, sh.sh_name);
    if (!name || std::strcmp(name, ".note.stapsdt") != 0) continue;
    Elf_Data* data = elf_getdata(scn, nullptr);
    std::size_t off = 0, name_off = 0, desc_off = 0;
    GElf_Nhdr nh;
    while (data && (off = gelf_getnote(data, off, &nh, &name_off, &desc_off)) > 0) {
      const char* owner = static_cast<const char*>(data->d_buf) + name_off;
      if (nh.n_type != 3 || nh.n_namesz != 8 || std::strncmp(owner, "stapsdt", 8) != 0 ||
          nh.n_descsz < 3 * 8 + 3)
        continue;
      const char* d = static_cast<const char*>(data->d_buf) + desc_off;
      const char* end = d + nh.n_descsz;
      UsdtProbe p;
      std::uint64_t base_note = 0;
      std::memcpy(&p.pc, d, 8);
      std::memcpy(&base_note, d + 8, 8);
      std::memcpy(&p.semaphore, d + 16, 8);
      if (base_actual && base_note) {
        p.pc += base_actual - base_note;
        if (p.semaphore) p.semaphore += base_actual - base_note;
      }
      const char* s = d + 24;
      auto next = [&](std::string& into) {
        const char* z = static_cast<const char*>(std::memchr(s, '\0', end - s));
        if (!z) return false;
        into.assign(s, z);
        s = z + 1;
        return true;
      };
      if (next(p.provider) && next(p.name) && next(p.args)) out.push_back(std::move(p));
    }
  }
  elf_end(elf);
  ::close(fd);
  return out;
}

}  // namespace loupe::sdk

#endif  // LOUPE_SDK_USDT_HPP
