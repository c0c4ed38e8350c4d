// SPDX-License-Identifier: Apache-2.0
#include "session/target_process.hpp"

#include <fcntl.h>
#include <fmt/format.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <stdexcept>
#include <thread>

namespace loupe {

TargetProcess::TargetProcess(std::vector<std::string> argv) {
  if (argv.empty()) throw std::runtime_error("empty command");
  int go[2], ex[2];
  if (pipe2(go, O_CLOEXEC) != 0 || pipe2(ex, O_CLOEXEC) != 0)
    throw std::runtime_error(fmt::format("pipe: {}", std::strerror(errno)));
  std::vector<char*> args;
  for (auto& a : argv) args.push_back(a.data());
  args.push_back(nullptr);
  pid_t pid = fork();
  if (pid < 0) throw std::runtime_error(fmt::format("fork: {}", std::strerror(errno)));
  if (pid == 0) {
    // Child: only async-signal-safe calls from here on.
    prctl(PR_SET_PDEATHSIG, SIGTERM);
    close(go[1]);
    close(ex[0]);
    char c;
    ssize_t n;
    do {
      n = read(go[0], &c, 1);
    } while (n < 0 && errno == EINTR);
    if (n != 1) _exit(126);  // loupe gave up before releasing us
    execvp(args[0], args.data());
    int err = errno;
    (void)!write(ex[1], &err, sizeof(err));
    _exit(127);
  }
  pid_ = pid;
  close(go[0]);
  close(ex[1]);
  go_fd_ = go[1];
  exec_fd_ = ex[0];
}

TargetProcess::~TargetProcess() {
  if (go_fd_ >= 0) close(go_fd_);  // an unreleased child sees EOF and exits
  if (exec_fd_ >= 0) close(exec_fd_);
  if (pid_ > 0 && !status_) terminate(std::chrono::milliseconds(500));
}

Status TargetProcess::release() {
  char c = 'g';
  if (write(go_fd_, &c, 1) != 1)
    return make_error(fmt::format("cannot release the target: {}", std::strerror(errno)));
  close(go_fd_);
  go_fd_ = -1;
  int err = 0;
  ssize_t n;
  do {
    n = read(exec_fd_, &err, sizeof(err));
  } while (n < 0 && errno == EINTR);
  close(exec_fd_);
  exec_fd_ = -1;
  if (n == sizeof(err)) {
    poll_exit();
    return make_error(std::strerror(err));
  }
  return {};
}

std::optional<int> TargetProcess::poll_exit() {
  if (status_ || pid_ <= 0) return status_;
  int st = 0;
  pid_t r = waitpid(pid_, &st, WNOHANG);
  if (r == pid_) status_ = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
  return status_;
}

void TargetProcess::terminate(std::chrono::milliseconds grace) {
  if (pid_ <= 0 || poll_exit()) return;
  kill(pid_, SIGTERM);
  auto deadline = std::chrono::steady_clock::now() + grace;
  while (!poll_exit() && std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  if (!poll_exit()) {
    kill(pid_, SIGKILL);
    int st = 0;
    waitpid(pid_, &st, 0);
    status_ = 128 + SIGKILL;
  }
}

}  // namespace loupe
