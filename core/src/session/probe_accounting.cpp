// SPDX-License-Identifier: Apache-2.0
#include "session/probe_accounting.hpp"

#include <spdlog/spdlog.h>
#include <time.h>
#include <unistd.h>

#include "loupe/abi/host.h"
#include "util/clock.hpp"

namespace loupe {

std::uint64_t ProbeAccounting::self_cpu_ns() {
  timespec ts{};
  ::clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  return static_cast<std::uint64_t>(ts.tv_sec) * 1000000000ull +
         static_cast<std::uint64_t>(ts.tv_nsec);
}

void ProbeAccounting::enable() {
  if (Status st = stats_.enable(); !st) {
    spdlog::warn("--stats: {}; the session runs without per-probe statistics", st.error());
    error_ = st.error();
    return;
  }
  reporter_ = std::make_unique<ProbeStatsReporter>(
      publish_, static_cast<unsigned>(sysconf(_SC_NPROCESSORS_ONLN)));
}

void ProbeAccounting::start(std::uint64_t mono_ns, std::uint64_t wall_ns) {
  if (reporter_) reporter_->start(mono_ns, wall_ns, self_cpu_ns());
}

void ProbeAccounting::snapshot(const LinkSet& links) {
  final_ = links.program_stats();
  final_ns_ = clock_ns(LOUPE_CLOCK_MONOTONIC);
  final_self_ns_ = self_cpu_ns();
}

double ProbeAccounting::attached_s() const {
  return reporter_ ? static_cast<double>(final_ns_ - reporter_->start_ns()) / 1e9 : 0;
}

void ProbeAccounting::report(const LinkSet& links, bool is_final) {
  if (reporter_)
    reporter_->report(is_final ? final_ : links.program_stats(),
                      is_final ? final_ns_ : clock_ns(LOUPE_CLOCK_MONOTONIC),
                      is_final ? final_self_ns_ : self_cpu_ns(), is_final);
  else if (is_final)
    ProbeStatsReporter(publish_, 1).report_misses(final_, true);
}

}  // namespace loupe
