// SPDX-License-Identifier: Apache-2.0
//
// Runs one of the known-symbol programs, collects the "name 0xaddr" lines it prints up
// to "ready", and kills it at scope exit.
#ifndef LOUPE_TESTS_SYMBOLIZER_LIVE_TARGET_HPP
#define LOUPE_TESTS_SYMBOLIZER_LIVE_TARGET_HPP

#include <sys/types.h>

#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <vector>

namespace loupe::test {

class LiveTarget {
 public:
  explicit LiveTarget(const std::string& path) : LiveTarget(std::vector<std::string>{path}) {}
  // argv[0] is run through PATH (e.g. `unshare -m sh -c '...; exec TARGET'`); the program
  // it ends up as prints the addresses.
  explicit LiveTarget(const std::vector<std::string>& argv) : LiveTarget(argv, nullptr) {}
  // `before_exec` runs with the child's pid while the child waits to exec (what a session
  // does with its command), e.g. to ask the kernel for its records.
  LiveTarget(const std::vector<std::string>& argv, const std::function<void(pid_t)>& before_exec);
  ~LiveTarget() { kill(); }
  LiveTarget(const LiveTarget&) = delete;
  LiveTarget& operator=(const LiveTarget&) = delete;

  std::uint32_t pid() const { return static_cast<std::uint32_t>(pid_); }
  // The runtime address the program printed for `name`; throws when it printed none.
  std::uint64_t addr(const std::string& name) const;
  // SIGKILL to its process group (what it forked too) and reap; the pid is gone afterwards.
  void kill();

 private:
  pid_t pid_ = -1;
  std::map<std::string, std::uint64_t> addrs_;
};

}  // namespace loupe::test

#endif
