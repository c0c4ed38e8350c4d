// SPDX-License-Identifier: Apache-2.0
//
// Decodes the jitregions ring (region changes and samples, in order) into the region
// table, names sampled JIT code through the host symbolizer (perf maps) while the process
// runs, and reports regions, attribution, first-execution latency and churn.
// decode() runs on a core worker thread, report() on the session thread: one mutex.
#ifndef LOUPE_JITREGIONS_JIT_TRACKER_HPP
#define LOUPE_JITREGIONS_JIT_TRACKER_HPP

#include <cstdint>
#include <map>
#include <mutex>
#include <string>
#include <utility>

#include "jitregions.h"
#include "loupe/sdk/host.hpp"
#include "region_table.hpp"

namespace loupe::jitregions {

class JitTracker {
 public:
  JitTracker(const sdk::Host& host, TableLimits limits) : host_(host), table_(limits) {}

  // The ring's decoder (sdk::register_fixed_ring): one region change or sample.
  int decode(const void* data, std::uint32_t len);
  void on_event(const jr_event& e);
  // Seeds the executable anonymous (and memfd) regions `pid` already has, read from
  // /proc/PID/maps: a session that attaches to a running runtime would otherwise know only
  // the regions installed after it attached. Returns how many; 0 when the process is gone.
  std::size_t seed_existing(std::uint32_t pid, std::uint64_t now_boot_ns);
  void report(bool is_final, std::uint64_t window_start_ns, std::uint64_t window_end_ns);

  // For tests of the decoding without a ring.
  const RegionTable& table() const { return table_; }

 private:
  struct SymbolCount {
    std::uint64_t samples = 0;
    std::uint64_t address = 0;  // one sampled address, for the frame
    std::string module;
    std::uint32_t resolution = 0;
    bool in_region = false;
  };
  // A name for a sampled address: the JIT symbol when the perf map has it.
  void count_symbol(std::uint32_t tgid, std::uint64_t ip, const Region* region);
  void emit_process(const ProcessRegions& p, bool is_final, std::uint64_t ws, std::uint64_t we);
  void emit_region(const ProcessRegions& p, const Region& r, bool is_final, std::uint64_t ws,
                   std::uint64_t we);

  sdk::Host host_;
  std::mutex mu_;
  RegionTable table_;
  // (tgid, symbol) -> samples; bounded by kMaxSymbols per process (the rest is "[other]").
  std::map<std::pair<std::uint32_t, std::string>, SymbolCount> symbols_;
  std::map<std::uint32_t, std::size_t> symbols_per_process_;
  std::uint64_t malformed_ = 0;
  std::uint64_t samples_in_kernel_ = 0;
  static constexpr std::size_t kMaxSymbols = 1024;
};

}  // namespace loupe::jitregions

#endif  // LOUPE_JITREGIONS_JIT_TRACKER_HPP
