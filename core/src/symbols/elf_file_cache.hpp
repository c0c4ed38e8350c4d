// SPDX-License-Identifier: Apache-2.0
//
// ELF symbol tables by file identity, shared across processes: every process mapping
// libc reuses one table. Keyed by (device, inode, size, mtime) of the opened file, so a
// file replaced in place (new inode, or same inode rewritten) is read again. Bounded by
// count with least-recently-used eviction; a table still used by a cached process stays
// alive through that process's reference. Not thread-safe: the symbolizer's lock guards it.
#ifndef LOUPE_SYMBOLS_ELF_FILE_CACHE_HPP
#define LOUPE_SYMBOLS_ELF_FILE_CACHE_HPP

#include <cstdint>
#include <list>
#include <map>
#include <memory>
#include <string>
#include <tuple>

#include "symbols/elf_symbol_table.hpp"

namespace loupe {

class ElfFileCache {
 public:
  ElfFileCache(std::size_t max_files, std::string debug_root)
      : max_files_(max_files == 0 ? 1 : max_files), debug_root_(std::move(debug_root)) {}

  // The table of the file open on `fd` (the caller keeps fd); nullptr when it is not an
  // ELF file (remembered too, so a data file mapped by many processes is read once).
  std::shared_ptr<const ElfSymbolTable> get(int fd);

  std::size_t size() const { return lru_.size(); }
  // Where a debug file fetched later (debuginfod) is found, for tables loaded from now on.
  void set_debug_lookup(ElfSymbolTable::DebugLookup lookup) { debug_lookup_ = std::move(lookup); }
  // Drops the tables of `build_id`: the next get() reads the file again (a debug file for
  // it has arrived).
  void forget_build_id(const std::string& build_id);
  std::uint64_t loads() const { return loads_; }

 private:
  using Key = std::tuple<std::uint64_t, std::uint64_t, std::int64_t, std::int64_t, std::int64_t>;
  struct Slot {
    Key key;
    std::shared_ptr<const ElfSymbolTable> table;
  };

  std::size_t max_files_;
  std::string debug_root_;
  ElfSymbolTable::DebugLookup debug_lookup_;
  std::list<Slot> lru_;  // most recent first
  std::map<Key, std::list<Slot>::iterator> index_;
  std::uint64_t loads_ = 0;
};

}  // namespace loupe

#endif  // LOUPE_SYMBOLS_ELF_FILE_CACHE_HPP
