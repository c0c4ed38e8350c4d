// SPDX-License-Identifier: Apache-2.0
//
// HotSpot JVMs of the target are asked for their perf map (jcmd's Compiler.perfmap through
// their attach listener, symbols/jvm_attach.hpp), so that JIT frames get method names
// without the JVM having been started with a flag ([runtimes.hotspot] perf_map).
//
// Session thread: JVMs are found by the HotSpot runtime's update(), on the tables' refresh.
//
// The map lists the code cache as it is when asked: methods compiled later, or moved by a
// recompilation, are missing until the next ask. So a JVM is asked when it is found (it
// maps libjvm.so), again 0.5 s later and then at doubling intervals up to 10 s (a JVM
// compiles most in its first seconds, and one the session started may exit at any time),
// and once more just before the final report. A JVM that refuses, or still has no listener
// when it is 10 s old (one slower than the attach bound on a loaded machine is asked again
// until then), is asked no more, and is a WARN health record at the end. Once a map was
// written, a failed ask only leaves it as it was: the JVM stays on the list, and a last ask
// that failed is a WARN naming what stays unnamed.
#ifndef LOUPE_RUNTIMES_HOTSPOT_JVM_PERF_MAPS_HPP
#define LOUPE_RUNTIMES_HOTSPOT_JVM_PERF_MAPS_HPP

#include <sys/types.h>

#include <chrono>
#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace loupe {

class HealthReport;

class JvmPerfMaps {
 public:
  void enable(bool on) { enabled_ = on; }
  // A process the session's one read of its maps found mapping libjvm.so (the runtime's
  // update()), or found no longer mapping it (an exec): asked from the next tick on, or not.
  void found(pid_t pid);
  void lost(pid_t pid);

  // The target's live processes, once per session tick: new JVMs are asked, answered ones
  // again when their interval is up. Each ask blocks for at most the attach bound.
  void tick(const std::vector<pid_t>& processes);
  // Just before the final symbolization: every JVM among the target's live processes, once
  // more.
  void before_final_report(const std::vector<pid_t>& processes);
  void report_health(HealthReport& health) const;

 private:
  using Clock = std::chrono::steady_clock;
  struct Jvm {
    Clock::time_point found;
    Clock::time_point next_ask;
    Clock::duration interval{};
    std::uint64_t answers = 0;
    double first_ms = 0;  // the first answer's time (the listener's start included)
    bool done = false;    // gone, or refused: asked no more
    std::string failure;  // why it refused (no map was ever written)
    std::string stale;    // why the last ask failed, after a map was written
  };
  void ask(pid_t pid, Jvm& jvm, Clock::time_point now);

  bool enabled_ = false;
  std::map<pid_t, Jvm> jvms_;
};

}  // namespace loupe

#endif  // LOUPE_RUNTIMES_HOTSPOT_JVM_PERF_MAPS_HPP
