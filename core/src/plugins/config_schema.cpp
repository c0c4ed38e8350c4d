// SPDX-License-Identifier: Apache-2.0
#include "plugins/config_schema.hpp"

#include "loupe/config_schema.hpp"

#include <algorithm>
#include <numeric>

namespace loupe {
namespace {

// Optimal string alignment distance: a transposition ("nestign") counts as one edit.
std::size_t edit_distance(std::string_view a, std::string_view b) {
  std::vector<std::vector<std::size_t>> d(a.size() + 1, std::vector<std::size_t>(b.size() + 1));
  for (std::size_t i = 0; i <= a.size(); ++i) d[i][0] = i;
  for (std::size_t j = 0; j <= b.size(); ++j) d[0][j] = j;
  for (std::size_t i = 1; i <= a.size(); ++i) {
    for (std::size_t j = 1; j <= b.size(); ++j) {
      std::size_t cost = a[i - 1] == b[j - 1] ? 0 : 1;
      d[i][j] = std::min({d[i - 1][j] + 1, d[i][j - 1] + 1, d[i - 1][j - 1] + cost});
      if (i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1])
        d[i][j] = std::min(d[i][j], d[i - 2][j - 2] + 1);
    }
  }
  return d[a.size()][b.size()];
}

std::vector<ConfigKeyInfo> describe_keys(const loupe_config_key* keys, std::uint32_t n,
                                         std::uint32_t stride) {
  std::vector<ConfigKeyInfo> out;
  for (std::uint32_t i = 0; i < n; ++i) {
    const loupe_config_key& k = *key_at(keys, i, stride);
    ConfigKeyInfo info;
    info.name = k.name;
    info.type = config_type_name(k.type);
    info.help = k.help ? k.help : "";
    info.required = (k.flags & LOUPE_CFG_REQUIRED) != 0;
    if (k.default_value) info.default_value = k.default_value;
    if (k.min_int || k.max_int) info.range = std::make_pair(k.min_int, k.max_int);
    for (auto c : key_choices(k, stride)) info.choices.emplace_back(c);
    if (k.type == LOUPE_CFG_TABLE_LIST) info.fields = describe_keys(k.fields, k.n_fields, stride);
    out.push_back(std::move(info));
  }
  return out;
}

}  // namespace

const char* config_type_name(std::uint32_t t) {
  switch (t) {
    case LOUPE_CFG_BOOL: return "boolean";
    case LOUPE_CFG_INT: return "integer";
    case LOUPE_CFG_FLOAT: return "float";
    case LOUPE_CFG_STRING: return "string";
    case LOUPE_CFG_STRING_LIST: return "array of strings";
    case LOUPE_CFG_INT_LIST: return "array of integers";
    case LOUPE_CFG_TABLE_LIST: return "array of tables";
    default: return "?";
  }
}

std::vector<ConfigKeyInfo> describe_config(const loupe_plugin_descriptor& d) {
  if (d.n_config_keys == 0 || d.config_keys == nullptr) return {};
  return describe_keys(d.config_keys, d.n_config_keys,
                       d.config_key_size ? d.config_key_size : sizeof(loupe_config_key));
}

std::string nearest_name(std::string_view word, const std::vector<std::string>& known) {
  std::string best;
  std::size_t best_d = 3;
  for (const auto& k : known) {
    std::size_t dist = edit_distance(word, k);
    if (dist < best_d && dist * 2 < std::max<std::size_t>(word.size(), 2)) {
      best_d = dist;
      best = k;
    }
  }
  return best;
}

}  // namespace loupe
