// SPDX-License-Identifier: Apache-2.0
//
// The profile keys of each runtime the session's unwinder reads ([runtimes.<name>]), as the
// table of runtimes declares them (runtimes/runtime_keys.cpp): the profile's validator
// checks them as a plugin's, and knows no runtime. A table of its own, apart from the
// runtimes' code, so that a parser (and its fuzzer) links no unwinder.
#ifndef LOUPE_PLUGINS_RUNTIME_KEYS_HPP
#define LOUPE_PLUGINS_RUNTIME_KEYS_HPP

#include <cstdint>
#include <vector>

#include "loupe/abi/plugin.h"

namespace loupe {

struct RuntimeKeys {
  const char* name;  // [runtimes.<name>]
  const loupe_config_key* keys;
  std::uint32_t n_keys;
};

// Every runtime of the table, in its order, with its keys (none: n_keys 0).
const std::vector<RuntimeKeys>& runtime_keys();

}  // namespace loupe

#endif  // LOUPE_PLUGINS_RUNTIME_KEYS_HPP
