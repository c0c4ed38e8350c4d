// SPDX-License-Identifier: Apache-2.0
//
// The runtimes' profile keys: a row per runtime of registry.cpp, in its order (checked by
// tests/core/profile_test.cpp), each runtime's keys as it reads them from its table.
#include "plugins/runtime_keys.hpp"

#include <iterator>

namespace loupe {
namespace {

const loupe_config_key kHotSpotKeys[] = {
    {"perf_map", LOUPE_CFG_BOOL, 0, "false",
     "also ask the target's HotSpot JVMs (JDK 17+) for their perf map through their attach "
     "listener (a signal and a socket); off: Java frames are read from the VM's own "
     "structures, without attach"},
};

const loupe_config_key kV8Keys[] = {
    {"frames", LOUPE_CFG_BOOL, 0, "true",
     "name Node.js processes' JavaScript frames from V8's own structures (false: their JIT "
     "frames by address, or by the perf map node writes with --perf-basic-prof)"},
};

}  // namespace

const std::vector<RuntimeKeys>& runtime_keys() {
  static const std::vector<RuntimeKeys> rows = {
      {"python", nullptr, 0},
      {"hotspot", kHotSpotKeys, static_cast<std::uint32_t>(std::size(kHotSpotKeys))},
      {"v8", kV8Keys, static_cast<std::uint32_t>(std::size(kV8Keys))},
  };
  return rows;
}

}  // namespace loupe
