// SPDX-License-Identifier: Apache-2.0
//
// An empty BPF program (r0 = 0; exit) attached to a tracepoint: the baseline `loupe bench`
// subtracts, so the cost a plugin adds is told apart from the cost of the attach mechanism
// itself (trap, context setup, program dispatch). Built from raw instructions, so the core
// needs no compiled object for it.
#ifndef LOUPE_EMPTY_PROBE_HPP
#define LOUPE_EMPTY_PROBE_HPP

#include <string>
#include <vector>

#include "loupe/program_stats.hpp"

namespace loupe {

class EmptyTracepointProbe {
 public:
  EmptyTracepointProbe() = default;
  ~EmptyTracepointProbe();
  EmptyTracepointProbe(const EmptyTracepointProbe&) = delete;
  EmptyTracepointProbe& operator=(const EmptyTracepointProbe&) = delete;

  // Loads the program (once) and attaches it to `category:name`; "" on success.
  std::string attach(const std::string& category, const std::string& name);
  void detach();
  // Runs and time of the program since it was loaded (counts only while stats are enabled).
  ProgramStats stats() const;

 private:
  int prog_fd_ = -1;
  std::vector<int> perf_fds_;
};

}  // namespace loupe

#endif  // LOUPE_EMPTY_PROBE_HPP
