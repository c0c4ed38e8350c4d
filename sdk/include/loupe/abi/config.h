/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Config schema: what a plugin declares so the host can validate a profile before any
 * plugin code runs, and so `loupe describe NAME` can print the keys.
 *
 * In a profile, a plugin's keys live in its `[[plugins]]` (or `[[sinks]]`) table next to
 * `name`. A key of type LOUPE_CFG_TABLE_LIST is an array of tables (`[[plugins.targets]]`)
 * whose own keys are declared in `fields`.
 */
#ifndef LOUPE_ABI_CONFIG_H
#define LOUPE_ABI_CONFIG_H

#include "loupe/abi/common.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum loupe_config_type {
  LOUPE_CFG_BOOL = 1,
  LOUPE_CFG_INT = 2,   /* int64; bounded by [min_int, max_int] */
  LOUPE_CFG_FLOAT = 3, /* double; integers are accepted */
  LOUPE_CFG_STRING = 4,
  LOUPE_CFG_STRING_LIST = 5, /* array of strings */
  LOUPE_CFG_INT_LIST = 6,    /* array of int64, each bounded by [min_int, max_int] */
  LOUPE_CFG_TABLE_LIST = 7,  /* array of tables validated against `fields` */
} loupe_config_type;

typedef enum loupe_config_flags {
  LOUPE_CFG_REQUIRED = 1u << 0, /* the profile must set it */
} loupe_config_flags;

/*
 * One declared key. Arrays of keys are static data in the plugin library; the host reads
 * them (never writes) for as long as the library is loaded. The array stride is
 * loupe_plugin_descriptor.config_key_size so this struct may grow at its end.
 */
typedef struct loupe_config_key {
  const char* name;          /* required; [a-z0-9_]+ */
  uint32_t type;             /* loupe_config_type */
  uint32_t flags;            /* loupe_config_flags */
  const char* default_value; /* TOML literal text ("100", "true", "\"ns\"", "[]"); NULL = none */
  const char* help;          /* one line, required */
  int64_t min_int;           /* INT / INT_LIST bounds; both 0 = unbounded */
  int64_t max_int;
  const struct loupe_config_key* fields; /* TABLE_LIST only */
  uint32_t n_fields;
  uint32_t reserved;
  /* ABI 1.1. STRING / STRING_LIST: the allowed values, a NULL-terminated array of
   * strings, static data like the key itself; NULL = any string. The host rejects any
   * other value at validation (file:line:col and the allowed values) and `describe`
   * lists them, so a plugin never re-checks an enumerated key. The host reads this field
   * only when config_key_size covers it, so 1.0 plugins (64-byte keys) still load. */
  const char* const* choices;
} loupe_config_key;

/* Opaque, host-owned view of one validated plugin table (or one element of a TABLE_LIST).
 * Valid from create() until destroy() of the plugin instance it was handed to. */
typedef struct loupe_config loupe_config;

#ifdef __cplusplus
}
#endif

#endif /* LOUPE_ABI_CONFIG_H */
