// SPDX-License-Identifier: Apache-2.0
//
// Turns the sampled counts of one allocation site into estimates of what the program
// really did. Kept apart from the BPF code so the arithmetic is unit-tested.
#ifndef LOUPE_MEMALLOC_SAMPLE_SCALING_HPP
#define LOUPE_MEMALLOC_SAMPLE_SCALING_HPP

#include <cstdint>
#include <string>
#include <vector>

namespace loupe::memalloc {

struct Estimate {
  std::uint64_t count = 0;
  std::uint64_t bytes = 0;
};

class SampleScaling {
 public:
  // Every allocation recorded: estimates are the exact counts.
  static SampleScaling all() { return SampleScaling(Mode::kAll, 1); }
  // Each allocation recorded with probability 1/n: estimates are counts x n.
  static SampleScaling one_in(std::uint64_t n);
  // A Poisson process over allocated bytes with mean `mean_bytes` between sample points:
  // an allocation of s bytes is recorded with p(s) = 1 - exp(-s / mean_bytes), and a site
  // is scaled by 1 / p(average sampled size of that site) (pprof's heap scaling).
  static SampleScaling poisson(std::uint64_t mean_bytes);

  Estimate scale(std::uint64_t count, std::uint64_t bytes) const;
  bool exact() const { return mode_ == Mode::kAll; }
  std::string describe() const;  // "all", "1-in-8", "poisson-524288B"

  // The quantile table the BPF side draws exponential gaps from: entry i is the
  // (i + 0.5) / n quantile of Exp(mean), at least 1 byte.
  static std::vector<std::uint64_t> exponential_table(std::uint64_t mean_bytes, std::size_t n);

 private:
  enum class Mode { kAll, kOneIn, kPoisson };
  SampleScaling(Mode mode, std::uint64_t param) : mode_(mode), param_(param) {}
  Mode mode_;
  std::uint64_t param_;
};

}  // namespace loupe::memalloc

#endif  // LOUPE_MEMALLOC_SAMPLE_SCALING_HPP
