/* SPDX-License-Identifier: Apache-2.0 */
/*
 * loupe plugin ABI: versioning, status codes and the rules every table follows.
 *
 * STABILITY RULES (they apply to every struct in sdk/include/loupe/abi/):
 *  - Plain C only. No C++ type, exception or allocator crosses the boundary.
 *  - Every table that can grow starts with `uint32_t size` (sizeof the struct as the
 *    producer compiled it). Fields are only ever appended. A reader must check
 *    `size > offsetof(field)` before touching a field added after ABI 1.0
 *    (use LOUPE_ABI_HAS_FIELD).
 *  - ABI_MAJOR changes only when an existing field changes meaning or position. The host
 *    refuses a plugin with another major, and a plugin whose minor is newer than the host's
 *    (it may rely on host services the host does not have).
 *  - tests/abi/abi_layout_test.cpp pins offsetof() of every field: an accidental change
 *    fails CI.
 *
 * Strings are UTF-8, NUL-terminated. "Borrowed" means the callee may read it only during
 * the call; "host-owned until X" means it stays valid until X without copying.
 */
#ifndef LOUPE_ABI_COMMON_H
#define LOUPE_ABI_COMMON_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define LOUPE_ABI_MAJOR 1
/* 1.1: loupe_config_key.choices; 1.2: bpf_adopt_link_at, unwind_user, tree_map_fd,
 * LOUPE_RESOLVED_EH_FRAME; 1.3: loupe_session_info.profilers; 1.4: LOUPE_RECORD_FINDING,
 * loupe_record.finding; 1.5: unwind_tables_attach; 1.6: unwind_files_attach;
 * 1.7: unwind_python_attach, LOUPE_FRAME_PYTHON; 1.8: loupe_session_info.rotate_s,
 * loupe_flush_args.window_dir; 1.9: loupe_plugin_descriptor.set_rate (thinning under a
 * budget); 1.10: unwinder_maps (the session's unwinder, shared by every plugin's walk),
 * LOUPE_FRAME_JAVA, symbolize_stack (a frame that expands into the methods inlined at it);
 * 1.11: loupe_unwind_row packed into 8 bytes (the host writes 1.10's 12 into an older
 * plugin's own rows map, and shares the session's unwinder only with 1.11 and later),
 * loupe_health.whole, whole_unit and effect (a loss as a share, lost told from degraded);
 * 1.12: LOUPE_FRAME_JS (V8's JavaScript frames) */
#define LOUPE_ABI_MINOR 12

/* The one symbol a plugin library exports. Its type is loupe_plugin_entry_fn (plugin.h). */
#define LOUPE_PLUGIN_ENTRY_SYMBOL "loupe_plugin_entry"

#if defined(__GNUC__)
#define LOUPE_ABI_EXPORT __attribute__((visibility("default")))
#else
#define LOUPE_ABI_EXPORT
#endif

/* True when a size-prefixed struct produced by the other side carries `field`. */
#define LOUPE_ABI_HAS_FIELD(ptr, type, field) \
  ((ptr)->size >= offsetof(type, field) + sizeof(((type*)0)->field))

typedef enum loupe_status {
  LOUPE_OK = 0,
  LOUPE_ERR_INVALID_ARG = 1, /* bad config value or argument; last_error says which */
  LOUPE_ERR_UNSUPPORTED = 2, /* the kernel or host lacks a feature the plugin needs */
  LOUPE_ERR_NOT_FOUND = 3,   /* attach target, binary, symbol or file absent */
  LOUPE_ERR_PERMISSION = 4,  /* a capability is missing; last_error names it */
  LOUPE_ERR_KERNEL = 5,      /* BPF load/attach refused; last_error has the reason */
  LOUPE_ERR_RESOURCE = 6,    /* out of memory, fds, map space */
  LOUPE_ERR_INTERNAL = 7,    /* a bug; includes exceptions caught by the SDK firewall */
  LOUPE_ERR_AGAIN = 8,       /* transient; the caller may retry later */
} loupe_status;

typedef enum loupe_log_level {
  LOUPE_LOG_TRACE = 0,
  LOUPE_LOG_DEBUG = 1,
  LOUPE_LOG_INFO = 2,
  LOUPE_LOG_WARN = 3,
  LOUPE_LOG_ERROR = 4,
} loupe_log_level;

#ifdef __cplusplus
}
#endif

#endif /* LOUPE_ABI_COMMON_H */
