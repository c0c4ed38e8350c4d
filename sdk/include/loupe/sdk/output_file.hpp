// SPDX-License-Identifier: Apache-2.0
//
// Where a sink writes: "-" is stdout, a relative path lives under the session's output
// directory. Files are created 0600 (profiles reveal what a process does). Failures throw
// loupe::sdk::Error naming the path and strerror, because a report that silently went
// nowhere is worse than a failed session.
#ifndef LOUPE_SDK_OUTPUT_FILE_HPP
#define LOUPE_SDK_OUTPUT_FILE_HPP

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <string>
#include <string_view>

#include "loupe/sdk/plugin.hpp"

namespace loupe::sdk {

class OutputFile {
 public:
  OutputFile(const std::string& path, const char* output_dir, const char* who)
      : who_(who), path_(resolve(path, output_dir)) {
    if (path_.empty()) throw Error(LOUPE_ERR_INVALID_ARG, who_ + ": `path` is empty");
    if (path_ == "-") {
      fd_ = STDOUT_FILENO;
      return;
    }
    fd_ = ::open(path_.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    if (fd_ < 0) {
      int err = errno;
      throw Error(status_for(err),
                  who_ + ": cannot open '" + path_ + "' for writing: " + std::strerror(err));
    }
    owned_ = true;
  }
  ~OutputFile() {
    if (owned_) ::close(fd_);
  }
  OutputFile(const OutputFile&) = delete;
  OutputFile& operator=(const OutputFile&) = delete;

  void write(std::string_view bytes) {
    while (!bytes.empty()) {
      ssize_t n = ::write(fd_, bytes.data(), bytes.size());
      if (n < 0) {
        if (errno == EINTR) continue;
        int err = errno;
        throw Error(status_for(err),
                    who_ + ": write to '" + path_ + "' failed: " + std::strerror(err));
      }
      bytes.remove_prefix(static_cast<std::size_t>(n));
    }
  }
  const std::string& path() const { return path_; }
  int fd() const { return fd_; }

  static std::string resolve(const std::string& path, const char* output_dir) {
    if (path == "-" || path.empty() || path.front() == '/' || output_dir == nullptr ||
        *output_dir == '\0')
      return path;
    std::string dir = output_dir;
    if (dir.back() != '/') dir += '/';
    return dir + path;
  }

 private:
  static loupe_status status_for(int err) {
    switch (err) {
      case ENOENT:
      case ENOTDIR: return LOUPE_ERR_NOT_FOUND;
      case EACCES:
      case EPERM:
      case EROFS: return LOUPE_ERR_PERMISSION;
      default: return LOUPE_ERR_RESOURCE;
    }
  }

  std::string who_;
  std::string path_;
  int fd_ = -1;
  bool owned_ = false;
};

}  // namespace loupe::sdk

#endif  // LOUPE_SDK_OUTPUT_FILE_HPP
