// SPDX-License-Identifier: Apache-2.0
//
// The host side of one plugin instance: it IS the C ABI's opaque loupe_host and fills the
// loupe_host_services table whose functions forward to the session's shared services
// (features, links, rings, records, symbols, clocks).
#ifndef LOUPE_SESSION_PLUGIN_HOST_HPP
#define LOUPE_SESSION_PLUGIN_HOST_HPP

#include <atomic>
#include <string>

#include "dispatch/record_bus.hpp"
#include "dispatch/ring_dispatcher.hpp"
#include "kernel/bpf_lifecycle.hpp"
#include "loupe/abi/host.h"
#include "loupe/features.hpp"
#include "loupe/symbolizer.hpp"
#include "util/clock.hpp"

namespace loupe {

class StackWalk;

// Everything a session shares with all of its plugin hosts. Owned by the session.
struct HostContext {
  FeatureSet* features = nullptr;
  Symbolizer* symbolizer = nullptr;
  RingDispatcher* rings = nullptr;
  RecordBus* bus = nullptr;
  LinkSet* links = nullptr;
  StackWalk* walk = nullptr;  // its tables and the maps every plugin's walk shares (session thread)
  bool replay = false;        // replaying a capture: the kernel must not be touched
  std::atomic<std::uint64_t> window_start_ns{0};
  std::atomic<std::uint64_t> window_end_ns{0};  // 0 = "now" when a record is emitted
};

}  // namespace loupe

struct loupe_host {
  loupe_host(loupe::HostContext& ctx, std::string instance, std::string plugin);

  loupe::HostContext& ctx;
  std::string instance;
  std::string plugin;
  // The ABI minor the plugin was built against: services whose layout changed since answer
  // an older plugin in its own (unwinder_maps).
  std::uint16_t plugin_abi_minor = LOUPE_ABI_MINOR;
  loupe_host_services services{};
  std::atomic<std::uint64_t> emitted{0}, rejected{0};
};

namespace loupe {
using PluginHost = loupe_host;
}  // namespace loupe

#endif  // LOUPE_SESSION_PLUGIN_HOST_HPP
