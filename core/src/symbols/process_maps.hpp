// SPDX-License-Identifier: Apache-2.0
//
// One process's address space as /proc/PID/maps lists it.
#ifndef LOUPE_SYMBOLS_PROCESS_MAPS_HPP
#define LOUPE_SYMBOLS_PROCESS_MAPS_HPP

#include <cstdint>
#include <string>
#include <vector>

namespace loupe {

struct MapsEntry {
  std::uint64_t start;
  std::uint64_t end;
  std::uint64_t offset;  // file offset of `start`
  std::uint64_t inode;
  std::uint32_t dev_major;
  std::uint32_t dev_minor;
  bool executable;
  bool deleted;      // the path ended in " (deleted)": the file was unlinked or replaced
  std::string path;  // without the " (deleted)" suffix; "" for anonymous memory

  // A regular file (not [heap], [vdso], memfd:..., or anonymous memory).
  bool file_backed() const { return inode != 0 && !path.empty() && path.front() == '/'; }
};

// Reads `<proc_root>/<pid>/maps`, sorted by start. Returns false with `*err` = errno when
// it cannot be read (ENOENT/ESRCH: the process is gone). A kernel thread or a zombie
// lists nothing: true, with `out` empty.
bool read_process_maps(const std::string& proc_root, std::uint32_t pid, std::vector<MapsEntry>* out,
                       int* err);

// Which image `<proc_dir>/exe` is (its device and inode folded into one number); 0 when
// it cannot be read (the process is gone, or a kernel thread).
std::uint64_t exe_identity(const std::string& proc_dir);

// The device and inode a mapping of the file at `path` lists in maps, as (dev_major, dev_minor,
// inode); false when it cannot be mapped. On overlayfs (containers, a guest's overlay root)
// a mapping names the lower file, which stat() of the path does not give: so a file known
// only by path and a mapping's key (a process gone before it was read) are compared by
// mapping one page of it here and reading loupe's own maps.
bool mapped_identity(const std::string& path, std::uint32_t* dev_major, std::uint32_t* dev_minor,
                     std::uint64_t* inode);

// Parses the text of a maps file (exposed for tests on bytes).
std::vector<MapsEntry> parse_process_maps(const std::string& text);

}  // namespace loupe

#endif  // LOUPE_SYMBOLS_PROCESS_MAPS_HPP
