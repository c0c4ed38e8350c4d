// SPDX-License-Identifier: Apache-2.0
//
// Finding the shared library a process really runs with (its libc, or any library by
// soname prefix) through the process's own mappings, /proc/PID/maps, as uprobes need it:
// a process in another mount namespace (a container) maps files loupe cannot see under the
// same path, so the path is opened through /proc/PID/root, which names the same inode.
// The user-space half of attaching a uprobe; uprobe.hpp turns a symbol into its offset.
//
//   std::string libc = sdk::locate_library(target_pid, "libc");   // or throws NOT_FOUND
#ifndef LOUPE_SDK_LIBRARY_HPP
#define LOUPE_SDK_LIBRARY_HPP

#include <sys/stat.h>
#include <unistd.h>

#include <fstream>
#include <sstream>
#include <string>

#include "loupe/sdk/plugin.hpp"

namespace loupe::sdk {

// Where a distribution installs libraries, for one neither the target nor loupe maps and
// the ldconfig cache does not name: this architecture's multiarch directories (Debian),
// then lib64 (Fedora), then the plain ones.
inline constexpr const char* kLibraryDirs[] = {
#if defined(__x86_64__)
    "/lib/x86_64-linux-gnu",
    "/usr/lib/x86_64-linux-gnu",
#elif defined(__aarch64__)
    "/lib/aarch64-linux-gnu",
    "/usr/lib/aarch64-linux-gnu",
#endif
    "/lib64",
    "/usr/lib64",
    "/lib",
    "/usr/lib",
    "/usr/local/lib"};

// "libc" / "c" / "libc.so" -> "libc.so"; "libc.so.6" stays as it is.
inline std::string soname_prefix(const std::string& name) {
  std::string n = name.rfind("lib", 0) == 0 ? name : "lib" + name;
  if (n.find(".so") == std::string::npos) n += ".so";
  return n;
}

// True when the file name `base` is the library `prefix` (from soname_prefix()): the
// prefix itself, the prefix followed by a version ("libc.so.6"), or an old glibc's
// "libc-2.28.so".
inline bool soname_matches(const std::string& base, const std::string& prefix) {
  if (base.rfind(prefix, 0) == 0) return base.size() == prefix.size() || base[prefix.size()] == '.';
  auto so = prefix.find(".so");
  if (so == std::string::npos || so + 3 != prefix.size()) return false;  // versioned prefix
  std::string stem = prefix.substr(0, so) + "-";
  return base.rfind(stem, 0) == 0 && base.size() > stem.size() + 3 &&
         base.compare(base.size() - 3, 3, ".so") == 0;
}

// The first file-backed mapping in a /proc/PID/maps text whose file is the library
// `name` ("libc", "libpthread.so.0"); its path as that process sees it, or "".
inline std::string library_in_maps(const std::string& maps, const std::string& name) {
  const std::string prefix = soname_prefix(name);
  std::istringstream in(maps);
  std::string line;
  while (std::getline(in, line)) {
    auto slash = line.find('/');
    if (slash == std::string::npos) continue;
    std::string path = line.substr(slash);
    if (path.size() > 10 && path.compare(path.size() - 10, 10, " (deleted)") == 0) continue;
    if (soname_matches(path.substr(path.rfind('/') + 1), prefix)) return path;
  }
  return {};
}

// True when `pid` sees the files loupe sees: the same mount namespace (or unknown).
inline bool same_mount_namespace(int pid) {
  struct stat mine {
  }, theirs{};
  if (::stat("/proc/self/ns/mnt", &mine) != 0 ||
      ::stat(("/proc/" + std::to_string(pid) + "/ns/mnt").c_str(), &theirs) != 0)
    return true;
  return mine.st_ino == theirs.st_ino && mine.st_dev == theirs.st_dev;
}

// The library `name` mapped by `pid` (0 = this process), read from /proc/PID/maps. For a
// process in another mount namespace (a container) the path goes through /proc/PID/root,
// which names the file that process maps. "" when the process does not map it.
inline std::string find_mapped_library(int pid, const std::string& name) {
  const std::string proc = pid ? "/proc/" + std::to_string(pid) : std::string("/proc/self");
  std::ifstream in(proc + "/maps");
  std::ostringstream maps;
  maps << in.rdbuf();
  std::string path = library_in_maps(maps.str(), name);
  if (path.empty() || !pid || same_mount_namespace(pid)) return path;
  std::string via_root = proc + "/root" + path;
  return ::access(via_root.c_str(), R_OK) == 0 ? via_root : path;
}

// The library `name` of the target `pid`: the one it maps; with no target (pid 0), or a
// target that does not map it (yet: a held `loupe run -- cmd` child still runs loupe's
// image until exec), the one loupe itself maps. Throws Error(NOT_FOUND) naming both.
inline std::string locate_library(int pid, const std::string& name) {
  if (pid > 0)
    if (std::string p = find_mapped_library(pid, name); !p.empty()) return p;
  if (std::string p = find_mapped_library(0, name); !p.empty()) return p;
  throw Error(LOUPE_ERR_NOT_FOUND,
              "cannot find " + soname_prefix(name) + "* in " +
                  (pid > 0 ? "/proc/" + std::to_string(pid) + "/maps or " : std::string()) +
                  "/proc/self/maps: give the library's path");
}

}  // namespace loupe::sdk

#endif  // LOUPE_SDK_LIBRARY_HPP
