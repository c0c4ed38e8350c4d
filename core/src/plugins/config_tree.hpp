// SPDX-License-Identifier: Apache-2.0
//
// The validated, defaults-applied config of one plugin instance, as the host serves it
// through loupe_config handles. Built by the schema validator; immutable afterwards.
#ifndef LOUPE_PLUGINS_CONFIG_TREE_HPP
#define LOUPE_PLUGINS_CONFIG_TREE_HPP

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "loupe/abi/config.h"

struct loupe_config;

namespace loupe {

struct ConfigValue {
  loupe_config_type type = LOUPE_CFG_BOOL;
  bool b = false;
  std::int64_t i = 0;
  double f = 0;
  std::string s;
  std::vector<std::string> strings;
  std::vector<std::int64_t> ints;
  std::vector<std::unique_ptr<loupe_config>> tables;
};

}  // namespace loupe

// Defined at global scope: it is the C ABI's opaque loupe_config.
struct loupe_config {
  std::map<std::string, loupe::ConfigValue> values;
};

namespace loupe {
// The C accessors placed in the services table (host_services.cpp).
int config_bool(const loupe_config* cfg, const char* key, int* out);
int config_int(const loupe_config* cfg, const char* key, std::int64_t* out);
int config_float(const loupe_config* cfg, const char* key, double* out);
int config_string(const loupe_config* cfg, const char* key, const char** out);
int config_list_len(const loupe_config* cfg, const char* key, std::uint32_t* out);
int config_list_string(const loupe_config* cfg, const char* key, std::uint32_t idx,
                       const char** out);
int config_list_int(const loupe_config* cfg, const char* key, std::uint32_t idx, std::int64_t* out);
int config_list_table(const loupe_config* cfg, const char* key, std::uint32_t idx,
                      const loupe_config** out);
}  // namespace loupe

#endif  // LOUPE_PLUGINS_CONFIG_TREE_HPP
