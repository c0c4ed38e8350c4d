// SPDX-License-Identifier: Apache-2.0
#include "symbols/elf_file_cache.hpp"

#include <sys/stat.h>

namespace loupe {

std::shared_ptr<const ElfSymbolTable> ElfFileCache::get(int fd) {
  struct stat st {};
  if (::fstat(fd, &st) != 0) return nullptr;
  Key key{st.st_dev, st.st_ino, st.st_size, st.st_mtim.tv_sec, st.st_mtim.tv_nsec};
  if (auto it = index_.find(key); it != index_.end()) {
    lru_.splice(lru_.begin(), lru_, it->second);
    return it->second->table;
  }
  ++loads_;
  // A file that is not ELF is remembered as such (nullptr), so it is not read again.
  auto loaded = ElfSymbolTable::load(fd, debug_root_, debug_lookup_);
  std::shared_ptr<const ElfSymbolTable> table = loaded ? loaded.value() : nullptr;
  lru_.push_front({key, table});
  index_[key] = lru_.begin();
  while (lru_.size() > max_files_) {
    index_.erase(lru_.back().key);
    lru_.pop_back();
  }
  return table;
}

void ElfFileCache::forget_build_id(const std::string& build_id) {
  for (auto it = lru_.begin(); it != lru_.end();) {
    if (it->table && it->table->build_id() == build_id) {
      index_.erase(it->key);
      it = lru_.erase(it);
    } else {
      ++it;
    }
  }
}

}  // namespace loupe
