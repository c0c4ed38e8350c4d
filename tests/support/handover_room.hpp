// SPDX-License-Identifier: Apache-2.0
//
// The room a per-process map needs when a process's keys leave it at its exit
// (bpf/include/loupe/handover.bpf.h), from a first run that had room for everything: twice
// the keys of the process that lives the whole run (the workload's shell), of the most one
// short process made, and of the keys past the handover's list of 32 a process (those wait
// for a report). Shared by the profilers' handover tests.
#ifndef LOUPE_TEST_HANDOVER_ROOM_HPP
#define LOUPE_TEST_HANDOVER_ROOM_HPP

#include <algorithm>
#include <cstddef>
#include <cstdio>
#include <map>
#include <string>

namespace loupe::test {

struct HandoverRoom {
  std::size_t total = 0;  // keys the first run made, in all
  std::size_t room = 0;   // what the second run gets
};

// `keys`: keys (final stack records) by pid; `long_lived`: the pid that lived the run.
inline HandoverRoom handover_room(const std::map<std::string, std::size_t>& keys,
                                  const std::string& long_lived) {
  constexpr std::size_t kListed = 32;  // LOUPE_HANDOVER_KEYS
  std::size_t total = 0, shell = 0, child_max = 0, past_list = 0;
  for (const auto& [pid, n] : keys) {
    total += n;
    if (pid == long_lived) {
      shell = n;
    } else {
      child_max = std::max(child_max, n);
      past_list += n > kListed ? n - kListed : 0;
    }
  }
  std::printf(
      "  keys: %zu in all, the long-lived process's %zu, a child's at most %zu, past "
      "the list %zu\n",
      total, shell, child_max, past_list);
  return {total, 2 * shell + 2 * std::min(child_max, kListed) + 2 * past_list + 4};
}

}  // namespace loupe::test

#endif  // LOUPE_TEST_HANDOVER_ROOM_HPP
