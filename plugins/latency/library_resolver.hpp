// SPDX-License-Identifier: Apache-2.0
//
// Turns the binary part of a user-function target ("libc", "libpthread.so.0",
// "/usr/bin/app", "bash") into the absolute path of an ELF file uprobes can attach to.
#ifndef LOUPE_LATENCY_LIBRARY_RESOLVER_HPP
#define LOUPE_LATENCY_LIBRARY_RESOLVER_HPP

#include <string>
#include <vector>

namespace loupe::latency {

class LibraryResolver {
 public:
  // `ldconfig_output` is the text of `ldconfig -p` (injected so tests control it);
  // `search_dirs` are scanned when the cache has no match.
  LibraryResolver(std::string ldconfig_output, std::vector<std::string> search_dirs);

  // Reads `ldconfig -p` and searches sdk::kLibraryDirs.
  static LibraryResolver from_system();

  // A library name is looked up first in the mappings of `pid` (when > 0), then in loupe's
  // own, then in the ldconfig cache and the library directories; an executable name in PATH. Throws
  // std::runtime_error naming what was tried when nothing matches.
  std::string resolve(const std::string& binary, int pid = 0) const;

 private:
  std::string from_cache(const std::string& soname_prefix) const;
  std::string from_dirs(const std::string& soname_prefix) const;
  static std::string from_path_env(const std::string& name);

  std::string ldconfig_output_;
  std::vector<std::string> search_dirs_;
};

}  // namespace loupe::latency

#endif  // LOUPE_LATENCY_LIBRARY_RESOLVER_HPP
