// SPDX-License-Identifier: Apache-2.0
#include "sample_scaling.hpp"

#include <cmath>
#include <stdexcept>

namespace loupe::memalloc {

SampleScaling SampleScaling::one_in(std::uint64_t n) {
  if (n == 0) throw std::invalid_argument("sample_every must be at least 1");
  return n == 1 ? all() : SampleScaling(Mode::kOneIn, n);
}

SampleScaling SampleScaling::poisson(std::uint64_t mean_bytes) {
  if (mean_bytes == 0) throw std::invalid_argument("sample_bytes must be at least 1");
  return SampleScaling(Mode::kPoisson, mean_bytes);
}

Estimate SampleScaling::scale(std::uint64_t count, std::uint64_t bytes) const {
  switch (mode_) {
    case Mode::kAll: return {count, bytes};
    case Mode::kOneIn: return {count * param_, bytes * param_};
    case Mode::kPoisson: {
      if (count == 0) return {0, 0};
      double avg = static_cast<double>(bytes) / static_cast<double>(count);
      double p = -std::expm1(-avg / static_cast<double>(param_));
      if (p <= 0) return {count, bytes};
      return {static_cast<std::uint64_t>(std::llround(static_cast<double>(count) / p)),
              static_cast<std::uint64_t>(std::llround(static_cast<double>(bytes) / p))};
    }
  }
  return {count, bytes};
}

std::string SampleScaling::describe() const {
  switch (mode_) {
    case Mode::kAll: return "all";
    case Mode::kOneIn: return "1-in-" + std::to_string(param_);
    case Mode::kPoisson: return "poisson-" + std::to_string(param_) + "B";
  }
  return "?";
}

std::vector<std::uint64_t> SampleScaling::exponential_table(std::uint64_t mean_bytes,
                                                            std::size_t n) {
  std::vector<std::uint64_t> out(n);
  for (std::size_t i = 0; i < n; ++i) {
    double q = (static_cast<double>(i) + 0.5) / static_cast<double>(n);
    double v = -std::log1p(-q) * static_cast<double>(mean_bytes);
    out[i] = v < 1 ? 1 : static_cast<std::uint64_t>(std::llround(v));
  }
  return out;
}

}  // namespace loupe::memalloc
