// SPDX-License-Identifier: Apache-2.0
//
// The parsers under fuzz read files by path or fd, as they do in production; this puts
// the fuzzed bytes in an anonymous memory file and names it by its /proc/self/fd path.
#ifndef LOUPE_FUZZ_FILE_HPP
#define LOUPE_FUZZ_FILE_HPP

#include <sys/mman.h>
#include <unistd.h>

#include <cstdint>
#include <cstdlib>
#include <string>

class FuzzFile {
 public:
  FuzzFile(const std::uint8_t* data, std::size_t size)
      : fd_(::memfd_create("loupe-fuzz", MFD_CLOEXEC)) {
    if (fd_ < 0) std::abort();
    for (std::size_t done = 0; done < size;) {
      ssize_t n = ::write(fd_, data + done, size - done);
      if (n <= 0) std::abort();
      done += static_cast<std::size_t>(n);
    }
    ::lseek(fd_, 0, SEEK_SET);
  }
  ~FuzzFile() { ::close(fd_); }
  FuzzFile(const FuzzFile&) = delete;
  FuzzFile& operator=(const FuzzFile&) = delete;

  int fd() const { return fd_; }
  std::string path() const { return "/proc/self/fd/" + std::to_string(fd_); }

 private:
  int fd_;
};

#endif  // LOUPE_FUZZ_FILE_HPP
