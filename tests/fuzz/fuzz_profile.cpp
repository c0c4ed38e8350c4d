// SPDX-License-Identifier: Apache-2.0
//
// Fuzzes the profile loader and the schema validator: the bytes are a profile's text;
// every [[plugins]]/[[sinks]] table that parses is validated against a descriptor that
// declares one key of every type (bounded and unbounded ints, lists, nested table lists),
// and the resulting config tree is read back through the C accessors plugins use.
#include <cstddef>
#include <cstdint>
#include <string>

#include "plugins/config_tree.hpp"
#include "plugins/profile.hpp"

namespace {

const loupe_config_key kInner[] = {
    {"depth", LOUPE_CFG_INT, 0, "1", "bounded int", 0, 8, nullptr, 0, 0},
    {"tags", LOUPE_CFG_STRING_LIST, 0, "[]", "strings", 0, 0, nullptr, 0, 0},
};
const loupe_config_key kTarget[] = {
    {"symbol", LOUPE_CFG_STRING, LOUPE_CFG_REQUIRED, nullptr, "required string", 0, 0, nullptr, 0,
     0},
    {"ratio", LOUPE_CFG_FLOAT, 0, "0.5", "float", 0, 0, nullptr, 0, 0},
    {"inner", LOUPE_CFG_TABLE_LIST, 0, "[]", "nested tables", 0, 0, kInner, 2, 0},
};
const loupe_config_key kKeys[] = {
    {"flag", LOUPE_CFG_BOOL, 0, "false", "bool", 0, 0, nullptr, 0, 0},
    {"size", LOUPE_CFG_INT, 0, "4096", "bounded int", 1, 1 << 30, nullptr, 0, 0},
    {"any_int", LOUPE_CFG_INT, 0, nullptr, "unbounded int", 0, 0, nullptr, 0, 0},
    {"neg", LOUPE_CFG_INT, 0, "-5", "negative range", INT64_MIN, -1, nullptr, 0, 0},
    {"rate", LOUPE_CFG_FLOAT, 0, "1.0", "float", 0, 0, nullptr, 0, 0},
    {"path", LOUPE_CFG_STRING, 0, "\"out.txt\"", "string", 0, 0, nullptr, 0, 0},
    {"names", LOUPE_CFG_STRING_LIST, 0, "[\"a\", \"b\"]", "strings", 0, 0, nullptr, 0, 0},
    {"pids", LOUPE_CFG_INT_LIST, 0, "[]", "bounded ints", 0, 4194304, nullptr, 0, 0},
    {"targets", LOUPE_CFG_TABLE_LIST, 0, "[]", "tables", 0, 0, kTarget, 3, 0},
};

loupe_plugin_descriptor make_descriptor() {
  loupe_plugin_descriptor d{};
  d.size = sizeof(d);
  d.abi_major = LOUPE_ABI_MAJOR;
  d.abi_minor = LOUPE_ABI_MINOR;
  d.kind = LOUPE_KIND_PROFILER;
  d.config_key_size = sizeof(loupe_config_key);
  d.name = "fuzz";
  d.version = "1";
  d.config_keys = kKeys;
  d.n_config_keys = sizeof(kKeys) / sizeof(kKeys[0]);
  return d;
}

// Reads every value back as plugins would, including through nested tables.
void read_back(const loupe_config* cfg, int depth) {
  for (const auto& [key, v] : cfg->values) {
    const char* k = key.c_str();
    int b;
    std::int64_t i;
    double f;
    const char* s;
    std::uint32_t n = 0;
    loupe::config_bool(cfg, k, &b);
    loupe::config_int(cfg, k, &i);
    loupe::config_float(cfg, k, &f);
    loupe::config_string(cfg, k, &s);
    if (loupe::config_list_len(cfg, k, &n) != LOUPE_OK) continue;
    for (std::uint32_t j = 0; j <= n; ++j) {  // one past the end on purpose: must refuse
      loupe::config_list_string(cfg, k, j, &s);
      loupe::config_list_int(cfg, k, j, &i);
      const loupe_config* sub = nullptr;
      if (loupe::config_list_table(cfg, k, j, &sub) == LOUPE_OK && sub && depth < 4)
        read_back(sub, depth + 1);
    }
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  static const loupe_plugin_descriptor kDesc = make_descriptor();
  const std::string text(reinterpret_cast<const char*>(data), size);
  try {
    loupe::Profile p = loupe::parse_profile_text(text, "/fuzz/profile.toml");
    for (auto& spec : p.plugins) {
      try {
        loupe::validate_plugin_config(spec, kDesc);
        read_back(spec.config.get(), 0);
      } catch (const loupe::ProfileError& e) {
        if (e.diagnostics().empty()) __builtin_trap();  // an error must say what is wrong
      }
    }
  } catch (const loupe::ProfileError& e) {
    if (e.diagnostics().empty()) __builtin_trap();
  }
  return 0;
}
