// SPDX-License-Identifier: Apache-2.0
#include "util/clock.hpp"

#include <time.h>

#include "loupe/abi/host.h"

namespace loupe {

std::uint64_t clock_ns(std::uint32_t clock) {
  clockid_t id = clock == LOUPE_CLOCK_BOOTTIME   ? CLOCK_BOOTTIME
                 : clock == LOUPE_CLOCK_REALTIME ? CLOCK_REALTIME
                                                 : CLOCK_MONOTONIC;
  timespec ts{};
  clock_gettime(id, &ts);
  return static_cast<std::uint64_t>(ts.tv_sec) * 1000000000ull +
         static_cast<std::uint64_t>(ts.tv_nsec);
}

}  // namespace loupe
