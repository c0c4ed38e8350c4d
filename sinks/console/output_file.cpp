// SPDX-License-Identifier: Apache-2.0
#include "output_file.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "loupe/sdk/plugin.hpp"

namespace loupe::sinks {
namespace {

loupe_status status_for(int err) {
  switch (err) {
    case ENOENT:
    case ENOTDIR:
      return LOUPE_ERR_NOT_FOUND;
    case EACCES:
    case EPERM:
    case EROFS:
      return LOUPE_ERR_PERMISSION;
    default:
      return LOUPE_ERR_RESOURCE;
  }
}

std::string resolve(const std::string& path, const char* output_dir) {
  if (path == "-" || path.empty() || path.front() == '/' || output_dir == nullptr ||
      *output_dir == '\0')
    return path;
  std::string dir = output_dir;
  if (dir.back() != '/') dir += '/';
  return dir + path;
}

}  // namespace

OutputFile::OutputFile(const std::string& path, const char* output_dir, const char* who)
    : who_(who), path_(resolve(path, output_dir)) {
  if (path_.empty()) throw sdk::Error(LOUPE_ERR_INVALID_ARG, who_ + ": `path` is empty");
  if (path_ == "-") {
    fd_ = STDOUT_FILENO;
    return;
  }
  fd_ = ::open(path_.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd_ < 0) {
    int err = errno;
    throw sdk::Error(status_for(err),
                     who_ + ": cannot open '" + path_ + "' for writing: " + std::strerror(err));
  }
  owned_ = true;
}

OutputFile::~OutputFile() {
  if (owned_) ::close(fd_);
}

void OutputFile::write(std::string_view bytes) {
  while (!bytes.empty()) {
    ssize_t n = ::write(fd_, bytes.data(), bytes.size());
    if (n < 0) {
      if (errno == EINTR) continue;
      int err = errno;
      throw sdk::Error(status_for(err), who_ + ": write to '" + path_ + "' failed: " +
                                            std::strerror(err));
    }
    bytes.remove_prefix(static_cast<std::size_t>(n));
  }
}

}  // namespace loupe::sinks
