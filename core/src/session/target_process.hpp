// SPDX-License-Identifier: Apache-2.0
//
// The command loupe profiles: forked and held before exec until every probe is attached
// (so its first instructions are observed), then released; reaped on exit.
#ifndef LOUPE_SESSION_TARGET_PROCESS_HPP
#define LOUPE_SESSION_TARGET_PROCESS_HPP

#include <sys/types.h>

#include <chrono>
#include <optional>
#include <string>
#include <vector>

#include "util/result.hpp"

namespace loupe {

class TargetProcess {
 public:
  // Forks; the child waits on a pipe. Throws std::runtime_error when fork fails.
  explicit TargetProcess(std::vector<std::string> argv);
  ~TargetProcess();
  TargetProcess(const TargetProcess&) = delete;
  TargetProcess& operator=(const TargetProcess&) = delete;

  pid_t pid() const { return pid_; }
  // Lets the child exec; the error says why exec failed (reported by the child).
  Status release();
  // Non-blocking: the exit status once the child has exited.
  std::optional<int> poll_exit();
  // SIGTERM, then SIGKILL after `grace`; reaps.
  void terminate(std::chrono::milliseconds grace);

 private:
  pid_t pid_ = -1;
  int go_fd_ = -1;    // parent writes one byte to release the child
  int exec_fd_ = -1;  // CLOEXEC: EOF on success, errno bytes when exec failed
  std::optional<int> status_;
};

}  // namespace loupe

#endif  // LOUPE_SESSION_TARGET_PROCESS_HPP
