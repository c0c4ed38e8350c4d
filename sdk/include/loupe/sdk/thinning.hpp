// SPDX-License-Identifier: Apache-2.0
//
// A profiler the host may thin to keep loupe within `[session] max_cpu_percent` (plugin
// ABI 1.9). The BPF side includes loupe/thin.bpf.h and weighs every event it keeps by
// loupe_thin_weight(); the plugin class holds a Thinning bound to that map and declares
//
//   void set_rate(const sdk::RateArgs& a) { thinning_.set(a.divisor); }
//
// which makes the SDK export the hook. Its skipped events go into a counter the plugin
// reports with thinning_.row(...): the counts it reports are then estimates, and the
// report says so.
//
// Session thread; not thread-safe.
#ifndef LOUPE_SDK_THINNING_HPP
#define LOUPE_SDK_THINNING_HPP

#include <bpf/bpf.h>

#include <cerrno>
#include <cstdint>
#include <cstring>
#include <string>

#include "loupe/sdk/plugin.hpp"
#include "loupe/sdk/records.hpp"

namespace loupe::sdk {

class Thinning {
 public:
  // After load: the fd of the plugin's `loupe_thin` map
  // (bpf_map__fd(skel->maps.loupe_thin)); borrowed, the object owns it.
  void bind(int map_fd) { fd_ = map_fd; }
  bool bound() const { return fd_ >= 0; }

  // Keep 1 in `divisor` events from now on. Throws when the map cannot be written (the
  // host counts the refusal and stops asking).
  void set(std::uint32_t divisor) {
    if (divisor < 1) divisor = 1;
    if (fd_ < 0)
      throw Error(LOUPE_ERR_UNSUPPORTED, "this mode's programs are not loaded with thinning");
    const std::uint32_t key = 0;
    if (bpf_map_update_elem(fd_, &key, &divisor, BPF_ANY) != 0)
      throw Error(LOUPE_ERR_KERNEL,
                  std::string("cannot set the thinning divisor: ") + std::strerror(errno));
    divisor_ = divisor;
    if (divisor > highest_) highest_ = divisor;
  }
  std::uint32_t divisor() const { return divisor_; }
  // The highest divisor of the session so far: 1 = never thinned.
  std::uint32_t highest() const { return highest_; }

  // A health row for the events thinning skipped (`skipped` from the plugin's counters):
  // WARN once any were, as the counts reported since are estimates.
  HealthRow row(const std::string& component, std::uint64_t skipped) {
    component_ = component;
    message_ =
        "events skipped to stay within [session] max_cpu_percent (at most 1 in " +
        std::to_string(highest_) +
        " kept): each kept event counts as the divisor then in force, so counts and times are "
        "estimates; raise the budget for exact counts";
    return HealthRow{component_.c_str(), skipped, message_.c_str()};
  }

 private:
  int fd_ = -1;
  std::uint32_t divisor_ = 1, highest_ = 1;
  std::string component_, message_;  // owned for the row's lifetime
};

}  // namespace loupe::sdk

#endif  // LOUPE_SDK_THINNING_HPP
