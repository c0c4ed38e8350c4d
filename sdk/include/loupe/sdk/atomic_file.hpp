// SPDX-License-Identifier: Apache-2.0
//
// Whole-file outputs for sinks that rewrite their file at each flush (pprof, html): written
// to PATH.tmp and renamed into place, so a reader (or a crash) never sees half of it.
// Files are created 0600 like OutputFile's. Failures throw loupe::sdk::Error naming the path.
#ifndef LOUPE_SDK_ATOMIC_FILE_HPP
#define LOUPE_SDK_ATOMIC_FILE_HPP

#include <fcntl.h>
#include <unistd.h>

#include <cctype>
#include <cerrno>
#include <cstring>
#include <string>
#include <string_view>

#include "loupe/sdk/plugin.hpp"

namespace loupe::sdk {

// replace_file(path, bytes): write whole, then rename. join_path: `file` under `dir`
// unless absolute. file_stem: a record name as a file name ([A-Za-z0-9_.-], never empty,
// never hidden).
inline void replace_file(const std::string& path, std::string_view bytes) {
  std::string tmp = path + ".tmp";
  int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  if (fd < 0)
    throw Error(errno == EACCES || errno == EPERM ? LOUPE_ERR_PERMISSION : LOUPE_ERR_RESOURCE,
                "cannot open '" + tmp + "' for writing: " + std::strerror(errno));
  while (!bytes.empty()) {
    ssize_t n = ::write(fd, bytes.data(), bytes.size());
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      int err = errno;
      ::close(fd);
      ::unlink(tmp.c_str());
      throw Error(LOUPE_ERR_RESOURCE, "write to '" + tmp + "' failed: " + std::strerror(err));
    }
    bytes.remove_prefix(static_cast<std::size_t>(n));
  }
  ::close(fd);
  if (::rename(tmp.c_str(), path.c_str()) != 0)
    throw Error(LOUPE_ERR_RESOURCE,
                "cannot rename '" + tmp + "' to '" + path + "': " + std::strerror(errno));
}

inline std::string join_path(const std::string& dir, const std::string& file) {
  if (!file.empty() && file.front() == '/') return file;
  if (dir.empty()) return file;
  return dir.back() == '/' ? dir + file : dir + "/" + file;
}

inline std::string file_stem(const std::string& name) {
  std::string out;
  for (char c : name)
    out +=
        (std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '-' || c == '.') ? c : '_';
  if (out.empty() || out.front() == '.') out.insert(out.begin(), '_');
  return out;
}

}  // namespace loupe::sdk

#endif  // LOUPE_SDK_ATOMIC_FILE_HPP
