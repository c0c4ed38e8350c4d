// SPDX-License-Identifier: Apache-2.0
//
// The session's clocks in one part: each periodic duty of the session loop (interval
// reports, window rotation, budget ticks) is registered with its period, and the loop asks
// which are due and how long it may sleep. A duty that fell behind (a report that took
// longer than its period) runs once and resumes on its own grid: reports keep their times,
// late ones do not pile up. Session thread; not thread-safe.
#ifndef LOUPE_SESSION_CADENCE_HPP
#define LOUPE_SESSION_CADENCE_HPP

#include <chrono>
#include <cstdint>
#include <vector>

namespace loupe {

class Cadence {
 public:
  using Clock = std::chrono::steady_clock;
  using Duty = std::uint32_t;  // an index; a bit of what due() returns

  explicit Cadence(Clock::time_point start) : start_(start) {}
  // A profile's seconds (a double) as the clock's duration.
  static Clock::duration seconds(double s) {
    return std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(s));
  }

  // A duty every `period`, first at start + `first`. A period of zero or less: never due
  // (an unset `interval`). At most 32 duties.
  Duty every(Clock::duration period, Clock::duration first);
  // The duties due at `now` (bit d set for duty d), each moved to its first time past now.
  std::uint32_t due(Clock::time_point now);
  static bool has(std::uint32_t due, Duty d) { return (due >> d) & 1u; }
  // The earliest time a duty is due (time_point::max() when none ever is): the loop sleeps
  // until then at the latest, so no duty waits for a tick.
  Clock::time_point next() const;

 private:
  struct Entry {
    Clock::duration period;
    Clock::time_point at;
  };
  Clock::time_point start_;
  std::vector<Entry> duties_;
};

}  // namespace loupe

#endif  // LOUPE_SESSION_CADENCE_HPP
