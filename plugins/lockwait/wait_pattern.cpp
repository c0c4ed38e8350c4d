// SPDX-License-Identifier: Apache-2.0
#include "wait_pattern.hpp"

#include <cstdio>

namespace loupe::lockwait {

const char* to_string(WaitPattern p) {
  switch (p) {
    case WaitPattern::kConvoy: return "convoy";
    case WaitPattern::kLongHold: return "long_hold";
    case WaitPattern::kMixed: return "mixed";
    case WaitPattern::kNone: break;
  }
  return "none";
}

PatternHint classify(const WaitShape& s) {
  PatternHint h;
  if (s.waits < kMinWaitsForHint) {
    h.text = "too few waits (" + std::to_string(s.waits) + ") to tell a pattern";
    return h;
  }
  double rate = s.window_s > 0 ? static_cast<double>(s.waits) / s.window_s : 0;
  char buf[256];
  if (s.p50_ns >= kLongHoldMinP50Ns) {
    h.pattern = WaitPattern::kLongHold;
    std::snprintf(buf, sizeof(buf),
                  "long hold: typical wait %.2f ms (max %.2f ms) over %llu waits by %u threads: "
                  "the holder keeps the lock for long; move slow work out of the critical "
                  "section",
                  s.p50_ns / 1e6, s.max_ns / 1e6, static_cast<unsigned long long>(s.waits),
                  s.threads);
  } else if (s.p50_ns < kConvoyMaxP50Ns && rate >= kConvoyMinRate) {
    h.pattern = WaitPattern::kConvoy;
    std::snprintf(buf, sizeof(buf),
                  "convoy: %.0f short waits/s (typical %.1f us) by %u threads: the lock is "
                  "taken too often; shorten, split or shard it",
                  rate, s.p50_ns / 1e3, s.threads);
  } else {
    h.pattern = WaitPattern::kMixed;
    std::snprintf(buf, sizeof(buf),
                  "mixed: typical wait %.1f us at %.0f waits/s by %u threads: neither a "
                  "clear convoy nor long holds",
                  s.p50_ns / 1e3, rate, s.threads);
  }
  h.text = buf;
  return h;
}

}  // namespace loupe::lockwait
