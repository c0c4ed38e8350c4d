// SPDX-License-Identifier: Apache-2.0
#include "live_target.hpp"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <sstream>
#include <stdexcept>

namespace loupe::test {

LiveTarget::LiveTarget(const std::vector<std::string>& argv,
                       const std::function<void(pid_t)>& before_exec) {
  const std::string& path = argv.at(0);
  std::vector<char*> args;
  for (const std::string& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  int fds[2], go[2];
  if (::pipe2(fds, O_CLOEXEC) != 0 || ::pipe2(go, O_CLOEXEC) != 0)
    throw std::runtime_error("pipe2 failed");
  pid_ = ::fork();
  if (pid_ < 0) throw std::runtime_error("fork failed");
  if (pid_ == 0) {
    ::setpgid(0, 0);
    ::dup2(fds[1], STDOUT_FILENO);
    char c;
    if (::read(go[0], &c, 1) != 1) ::_exit(126);
    ::execvp(path.c_str(), args.data());
    ::_exit(127);
  }
  ::setpgid(pid_, pid_);  // either side may run first
  ::close(fds[1]);
  ::close(go[0]);
  if (before_exec) before_exec(pid_);
  if (::write(go[1], "g", 1) != 1) throw std::runtime_error("cannot release the target");
  ::close(go[1]);
  std::string text;
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (text.find("ready\n") == std::string::npos) {
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        deadline - std::chrono::steady_clock::now());
    pollfd p{fds[0], POLLIN, 0};
    if (left.count() <= 0 || ::poll(&p, 1, static_cast<int>(left.count())) <= 0) break;
    char buf[1024];
    ssize_t n = ::read(fds[0], buf, sizeof(buf));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    text.append(buf, static_cast<std::size_t>(n));
  }
  ::close(fds[0]);
  if (text.find("ready\n") == std::string::npos) {
    kill();
    throw std::runtime_error(path + " did not report ready; got: " + text);
  }
  std::istringstream in(text);
  std::string name, value;
  while (in >> name && name != "ready" && in >> value)
    addrs_[name] = std::stoull(value, nullptr, 16);
}

std::uint64_t LiveTarget::addr(const std::string& name) const {
  auto it = addrs_.find(name);
  if (it == addrs_.end()) throw std::runtime_error("target printed no address for " + name);
  return it->second;
}

void LiveTarget::kill() {
  if (pid_ <= 0) return;
  ::kill(-pid_, SIGKILL);
  ::kill(pid_, SIGKILL);
  int status = 0;
  while (::waitpid(pid_, &status, 0) < 0 && errno == EINTR) {
  }
  pid_ = -1;
}

}  // namespace loupe::test
