// SPDX-License-Identifier: Apache-2.0
#include "plugins/config_tree.hpp"

#include "loupe/abi/common.h"

namespace loupe {
namespace {

const ConfigValue* find(const loupe_config* cfg, const char* key) {
  if (cfg == nullptr || key == nullptr) return nullptr;
  auto it = cfg->values.find(key);
  return it == cfg->values.end() ? nullptr : &it->second;
}

}  // namespace

int config_bool(const loupe_config* cfg, const char* key, int* out) {
  const ConfigValue* v = find(cfg, key);
  if (!v) return LOUPE_ERR_NOT_FOUND;
  if (v->type != LOUPE_CFG_BOOL) return LOUPE_ERR_INVALID_ARG;
  *out = v->b ? 1 : 0;
  return LOUPE_OK;
}

int config_int(const loupe_config* cfg, const char* key, std::int64_t* out) {
  const ConfigValue* v = find(cfg, key);
  if (!v) return LOUPE_ERR_NOT_FOUND;
  if (v->type != LOUPE_CFG_INT) return LOUPE_ERR_INVALID_ARG;
  *out = v->i;
  return LOUPE_OK;
}

int config_float(const loupe_config* cfg, const char* key, double* out) {
  const ConfigValue* v = find(cfg, key);
  if (!v) return LOUPE_ERR_NOT_FOUND;
  if (v->type == LOUPE_CFG_FLOAT) {
    *out = v->f;
  } else if (v->type == LOUPE_CFG_INT) {
    *out = static_cast<double>(v->i);
  } else {
    return LOUPE_ERR_INVALID_ARG;
  }
  return LOUPE_OK;
}

int config_string(const loupe_config* cfg, const char* key, const char** out) {
  const ConfigValue* v = find(cfg, key);
  if (!v) return LOUPE_ERR_NOT_FOUND;
  if (v->type != LOUPE_CFG_STRING) return LOUPE_ERR_INVALID_ARG;
  *out = v->s.c_str();
  return LOUPE_OK;
}

int config_list_len(const loupe_config* cfg, const char* key, std::uint32_t* out) {
  const ConfigValue* v = find(cfg, key);
  if (!v) return LOUPE_ERR_NOT_FOUND;
  switch (v->type) {
    case LOUPE_CFG_STRING_LIST: *out = static_cast<std::uint32_t>(v->strings.size()); break;
    case LOUPE_CFG_INT_LIST: *out = static_cast<std::uint32_t>(v->ints.size()); break;
    case LOUPE_CFG_TABLE_LIST: *out = static_cast<std::uint32_t>(v->tables.size()); break;
    default: return LOUPE_ERR_INVALID_ARG;
  }
  return LOUPE_OK;
}

int config_list_string(const loupe_config* cfg, const char* key, std::uint32_t idx,
                       const char** out) {
  const ConfigValue* v = find(cfg, key);
  if (!v) return LOUPE_ERR_NOT_FOUND;
  if (v->type != LOUPE_CFG_STRING_LIST || idx >= v->strings.size()) return LOUPE_ERR_INVALID_ARG;
  *out = v->strings[idx].c_str();
  return LOUPE_OK;
}

int config_list_int(const loupe_config* cfg, const char* key, std::uint32_t idx,
                    std::int64_t* out) {
  const ConfigValue* v = find(cfg, key);
  if (!v) return LOUPE_ERR_NOT_FOUND;
  if (v->type != LOUPE_CFG_INT_LIST || idx >= v->ints.size()) return LOUPE_ERR_INVALID_ARG;
  *out = v->ints[idx];
  return LOUPE_OK;
}

int config_list_table(const loupe_config* cfg, const char* key, std::uint32_t idx,
                      const loupe_config** out) {
  const ConfigValue* v = find(cfg, key);
  if (!v) return LOUPE_ERR_NOT_FOUND;
  if (v->type != LOUPE_CFG_TABLE_LIST || idx >= v->tables.size()) return LOUPE_ERR_INVALID_ARG;
  *out = v->tables[idx].get();
  return LOUPE_OK;
}

}  // namespace loupe
