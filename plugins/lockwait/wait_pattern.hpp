// SPDX-License-Identifier: Apache-2.0
//
// Tells convoying (many short waits: a hot lock taken and released at a high rate, every
// thread queueing briefly behind the others) from long holds (few, long waits: someone
// keeps the lock while doing slow work). The two call for different fixes: shorten or
// split the critical section vs. move the slow work out of it.
#ifndef LOUPE_LOCKWAIT_WAIT_PATTERN_HPP
#define LOUPE_LOCKWAIT_WAIT_PATTERN_HPP

#include <cstdint>
#include <string>

namespace loupe::lockwait {

struct WaitShape {
  std::uint64_t waits = 0;
  std::uint64_t total_ns = 0;
  std::uint64_t p50_ns = 0;  // from the log2 histogram (bucket midpoint)
  std::uint64_t max_ns = 0;
  std::uint32_t threads = 0;  // distinct waiting threads
  double window_s = 0;        // observation window
};

enum class WaitPattern { kNone, kConvoy, kLongHold, kMixed };

struct PatternHint {
  WaitPattern pattern = WaitPattern::kNone;
  std::string text;  // one sentence with the numbers behind the verdict
};

// Thresholds (documented in the README): a typical wait under kConvoyMaxP50Ns at
// kConvoyMinRate waits/s or more is a convoy; a typical wait of kLongHoldMinP50Ns or more
// is a long hold; anything else with enough waits is mixed.
inline constexpr std::uint64_t kConvoyMaxP50Ns = 200'000;
inline constexpr double kConvoyMinRate = 1000.0;
inline constexpr std::uint64_t kLongHoldMinP50Ns = 1'000'000;
inline constexpr std::uint64_t kMinWaitsForHint = 10;

PatternHint classify(const WaitShape& s);
const char* to_string(WaitPattern p);

}  // namespace loupe::lockwait

#endif  // LOUPE_LOCKWAIT_WAIT_PATTERN_HPP
