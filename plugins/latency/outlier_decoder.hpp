// SPDX-License-Identifier: Apache-2.0
//
// Turns an outlier ring record into an EVENT record (pid, tid, comm, duration, time and,
// when captured, the symbolized stacks). Runs on a core worker thread, possibly while
// collect() runs: it only reads state fixed before the ring was registered.
#ifndef LOUPE_LATENCY_OUTLIER_DECODER_HPP
#define LOUPE_LATENCY_OUTLIER_DECODER_HPP

#include <cstdint>
#include <string>
#include <vector>

#include "loupe/sdk/host.hpp"
#include "loupe/sdk/ustack.hpp"

namespace loupe::latency {

struct TargetLabels {
  std::string name;
  std::string mechanism;
  bool count_only = false;  // a single-probe target (usdt = ...): fired, never timed
  std::string label;        // a USDT argument reported as this label ("" = none)
  bool label_string = false;
};

class OutlierDecoder {
 public:
  OutlierDecoder(const sdk::Host& host, std::vector<TargetLabels> targets);

  // The rings' decoder: one outlier record (sdk::register_fixed_ring), or one with a
  // copied user stack (unwind = "dwarf", sdk::register_variable_ring), unwound here.
  int decode(const void* data, std::uint32_t len);

  const sdk::UstackUnwinder& unwinder() const { return unwinder_; }

 private:
  sdk::Host host_;
  std::vector<TargetLabels> targets_;
  sdk::UstackUnwinder unwinder_;
  std::vector<std::uint64_t> unwound_;  // reused: one decode at a time per ring
};

}  // namespace loupe::latency

#endif  // LOUPE_LATENCY_OUTLIER_DECODER_HPP
