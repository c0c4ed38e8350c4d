// SPDX-License-Identifier: Apache-2.0
#ifndef LOUPE_SINKS_CONSOLE_OUTPUT_FILE_HPP
#define LOUPE_SINKS_CONSOLE_OUTPUT_FILE_HPP

#include <string>
#include <string_view>

namespace loupe::sinks {

// Where a sink writes: "-" is stdout, a relative path lives under the session's output
// directory. Failures throw loupe::sdk::Error naming the path and strerror, because a
// report that silently went nowhere is worse than a failed session.
class OutputFile {
 public:
  OutputFile(const std::string& path, const char* output_dir, const char* who);
  ~OutputFile();
  OutputFile(const OutputFile&) = delete;
  OutputFile& operator=(const OutputFile&) = delete;

  void write(std::string_view bytes);
  const std::string& path() const { return path_; }
  int fd() const { return fd_; }

 private:
  std::string who_;
  std::string path_;
  int fd_ = -1;
  bool owned_ = false;
};

}  // namespace loupe::sinks

#endif
