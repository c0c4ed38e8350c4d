// SPDX-License-Identifier: Apache-2.0
#include "atomic_file.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <cctype>
#include <cerrno>
#include <cstring>

#include "loupe/sdk/plugin.hpp"

namespace loupe::sinks {

void replace_file(const std::string& path, std::string_view bytes) {
  std::string tmp = path + ".tmp";
  int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0)
    throw sdk::Error(errno == EACCES || errno == EPERM ? LOUPE_ERR_PERMISSION : LOUPE_ERR_RESOURCE,
                     "cannot open '" + tmp + "' for writing: " + std::strerror(errno));
  while (!bytes.empty()) {
    ssize_t n = ::write(fd, bytes.data(), bytes.size());
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      int err = errno;
      ::close(fd);
      ::unlink(tmp.c_str());
      throw sdk::Error(LOUPE_ERR_RESOURCE, "write to '" + tmp + "' failed: " + std::strerror(err));
    }
    bytes.remove_prefix(static_cast<std::size_t>(n));
  }
  ::close(fd);
  if (::rename(tmp.c_str(), path.c_str()) != 0)
    throw sdk::Error(LOUPE_ERR_RESOURCE,
                     "cannot rename '" + tmp + "' to '" + path + "': " + std::strerror(errno));
}

std::string join_path(const std::string& dir, const std::string& file) {
  if (!file.empty() && file.front() == '/') return file;
  if (dir.empty()) return file;
  return dir.back() == '/' ? dir + file : dir + "/" + file;
}

std::string file_stem(const std::string& name) {
  std::string out;
  for (char c : name)
    out += (std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '-' || c == '.') ? c : '_';
  if (out.empty() || out.front() == '.') out.insert(out.begin(), '_');
  return out;
}

}  // namespace loupe::sinks
