// SPDX-License-Identifier: Apache-2.0
//
// Reads the memalloc maps at each collect() and emits the records: one stack sample per
// allocation site and per leaking site, the size histogram, counters and health.
#ifndef LOUPE_MEMALLOC_REPORTER_HPP
#define LOUPE_MEMALLOC_REPORTER_HPP

#include <cstdint>
#include <map>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "dwarf_allocs.hpp"
#include "loupe/sdk/host.hpp"
#include "sample_scaling.hpp"
#include "site_table.hpp"
#include "stack_frames.hpp"

namespace loupe::memalloc {

struct ReporterMaps {
  int sites_fd = -1;
  int outstanding_fd = -1;
  int counters_fd = -1;
  int sizes_fd = -1;
};

struct ReporterOptions {
  std::size_t top = 0;                        // 0 = every site
  std::uint64_t min_age_ns = 0;               // younger live allocations are not reported as leaks
  std::uint64_t leak_age_ns = 5000000000ull;  // rule old_allocations: leak suspects' age
  std::uint32_t max_sites = 0;                // map sizes, for the health messages
  std::uint32_t max_outstanding = 0;
};

class MemallocReporter {
 public:
  MemallocReporter(const sdk::Host& host, ReporterMaps maps, ReporterOptions opts,
                   SampleScaling scaling, StackFrames& frames,
                   std::vector<std::pair<std::string, std::string>> skipped);

  void collect(bool is_final, std::uint64_t window_start_ns, std::uint64_t window_end_ns);
  // unwind = "dwarf": sites and live allocations' sites kept in user space.
  void set_dwarf(const DwarfAllocs* dwarf) { dwarf_ = dwarf; }

 private:
  SiteTable read_sites(std::uint64_t now_ns) const;  // ages as of now_ns (monotonic)
  ma_counters read_counters() const;
  void emit_sites(const std::vector<SiteRow>& rows, bool is_final, std::uint64_t now_ns);
  void emit_histogram(bool is_final);
  void emit_findings(const std::vector<SiteRow>& all, std::uint64_t now_ns);
  void emit_metric(const std::string& name, const char* unit, double v, bool is_final,
                   const std::string& func = {});
  void emit_health(const std::string& name, std::uint64_t v, const std::string& message,
                   bool is_final, loupe_health_severity bad = LOUPE_HEALTH_WARN);

  const sdk::Host& host_;
  ReporterMaps maps_;
  ReporterOptions opts_;
  SampleScaling scaling_;
  StackFrames& frames_;
  std::vector<std::pair<std::string, std::string>> skipped_;
  std::uint64_t win_start_ = 0, win_end_ = 0;
  const DwarfAllocs* dwarf_ = nullptr;
  // What each site's record said at the last interval report: a site that has not changed
  // since (an exited process's, mostly) is not restated until the final report. A soak of
  // short-lived processes otherwise restated every site of every process it had seen each
  // interval (34k records an interval, growing with the run, and the RSS with them).
  struct Said {
    std::uint64_t allocs, frees, outstanding;
    bool operator==(const Said&) const = default;
  };
  std::map<std::tuple<std::uint32_t, std::int32_t, std::int32_t, std::uint32_t>, Said> said_;
};

}  // namespace loupe::memalloc

#endif  // LOUPE_MEMALLOC_REPORTER_HPP
