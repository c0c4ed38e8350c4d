// SPDX-License-Identifier: Apache-2.0
#include "session/cadence.hpp"

#include <algorithm>
#include <stdexcept>

namespace loupe {

Cadence::Duty Cadence::every(Clock::duration period, Clock::duration first) {
  if (duties_.size() >= 32) throw std::logic_error("Cadence: more than 32 duties");
  const bool never = period <= Clock::duration::zero();
  duties_.push_back({period, never ? Clock::time_point::max() : start_ + first});
  return static_cast<Duty>(duties_.size() - 1);
}

std::uint32_t Cadence::due(Clock::time_point now) {
  std::uint32_t out = 0;
  for (std::size_t d = 0; d < duties_.size(); ++d) {
    Entry& e = duties_[d];
    if (now < e.at) continue;
    out |= 1u << d;
    // On its own grid: the first multiple of the period past now.
    const auto behind = (now - e.at) / e.period;
    e.at += (behind + 1) * e.period;
  }
  return out;
}

Cadence::Clock::time_point Cadence::next() const {
  auto at = Clock::time_point::max();
  for (const Entry& e : duties_) at = std::min(at, e.at);
  return at;
}

}  // namespace loupe
