// SPDX-License-Identifier: Apache-2.0
//
// A plugin's declared config keys as the host understands them: the same walk the profile
// validator does (stride, ABI-version-dependent fields), so `loupe describe`, an embedder's
// UI and validation can never disagree about what a key takes. Source-stable (see
// core/include/README.md).
#ifndef LOUPE_CONFIG_SCHEMA_HPP
#define LOUPE_CONFIG_SCHEMA_HPP

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "loupe/abi/plugin.h"

namespace loupe {

struct ConfigKeyInfo {
  std::string name;
  std::string type;  // "boolean", "integer", "float", "string", "array of strings", ...
  std::string help;
  bool required = false;
  std::optional<std::string> default_value;  // TOML literal text
  std::optional<std::pair<std::int64_t, std::int64_t>> range;
  std::vector<std::string> choices;   // empty = any value
  std::vector<ConfigKeyInfo> fields;  // array-of-tables keys only
};

// The user-facing name of a LOUPE_CFG_* type; also what validation errors say.
const char* config_type_name(std::uint32_t type);

std::vector<ConfigKeyInfo> describe_config(const loupe_plugin_descriptor& d);

}  // namespace loupe

#endif  // LOUPE_CONFIG_SCHEMA_HPP
