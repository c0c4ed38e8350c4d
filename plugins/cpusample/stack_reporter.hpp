// SPDX-License-Identifier: Apache-2.0
//
// Turns the in-kernel sample counts into records: one stack-sample record per (process,
// thread?, comm, user stack, kernel stack) with its sample count, plus totals and health
// (stack failures, truncated stacks, aggregation map full).
//
// Stacks are symbolized once and cached. warm() symbolizes new stacks while their process
// still runs (a process that exits before the final report could not be read any more);
// the plugin calls it from its own thread. warm() and collect() may run concurrently.
#ifndef LOUPE_CPUSAMPLE_STACK_REPORTER_HPP
#define LOUPE_CPUSAMPLE_STACK_REPORTER_HPP

#include <cstdint>
#include <map>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "cpusample.h"
#include "loupe/sdk/host.hpp"

namespace loupe::cpusample {

struct ReporterMaps {
  int counts_fd = -1;
  int stacks_fd = -1;
  int counters_fd = -1;
};

struct ReporterOptions {
  bool per_thread = false;
  std::string record_name = "cpu";
};

class StackReporter {
 public:
  StackReporter(const sdk::Host& host, ReporterMaps maps, ReporterOptions opts);

  void warm();
  void collect(bool is_final, std::uint64_t window_start_ns, std::uint64_t window_end_ns);

 private:
  using Frames = std::vector<loupe_frame>;
  std::vector<std::pair<cs_key, std::uint64_t>> read_counts() const;
  const Frames& user_frames(std::uint32_t tgid, std::int32_t stack_id);
  const Frames& kernel_frames(std::int32_t stack_id);
  // Raw addresses of a stack (leaf first); empty when the id is gone.
  std::vector<std::uint64_t> stack_addresses(std::int32_t stack_id) const;
  cs_counters read_counters() const;
  void emit_health(const cs_counters& c, std::uint64_t truncated, bool is_final, std::uint64_t ws,
                   std::uint64_t we);

  sdk::Host host_;
  ReporterMaps maps_;
  ReporterOptions opts_;
  std::mutex mu_;
  std::map<std::pair<std::uint32_t, std::int32_t>, Frames> user_cache_;
  std::map<std::int32_t, Frames> kernel_cache_;
  std::map<std::string, std::uint64_t> previous_;  // key bytes -> count at the last interval
};

}  // namespace loupe::cpusample

#endif  // LOUPE_CPUSAMPLE_STACK_REPORTER_HPP
