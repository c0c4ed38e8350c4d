/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The plugin descriptor: what a plugin library exports.
 *
 * A library exports exactly one symbol, LOUPE_PLUGIN_ENTRY_SYMBOL, of type
 * loupe_plugin_entry_fn. It returns a pointer to a static descriptor that stays valid
 * while the library is loaded. The host checks, in order: non-NULL, `size` large enough
 * for ABI 1.0, abi_major == host major, abi_minor <= host minor, kind known, name and
 * version set, the hooks required for the kind present, and the config schema valid.
 * Every refusal names the file, what was expected and what was found.
 *
 * Lifecycle of one instance (all calls on the session thread unless noted):
 *
 *   setup()      parse config, open BPF objects (no load), open outputs. Required.
 *   start()      profilers: load, attach, register rings. sinks: optional.
 *   collect()    profilers: read maps, emit records. Called every interval and once with
 *                is_final=1 after stop(). Optional (ring-only plugins).
 *   stop()       the host has detached every link it owns; stop producing and drain what
 *                is pending before drain_deadline_ns. Optional.
 *   consume()    sinks: one record. Called on that sink's own thread, never concurrently
 *                with itself or flush(). Required for sinks.
 *   flush()      sinks: write what is buffered (is_final=1: the last call). Sink thread.
 *                With `[session] rotate`, a flush may also end a window (window_dir set).
 *   set_rate()   profilers, optional (ABI 1.9): keep 1 in `divisor` events in the kernel
 *                and weigh each kept one `divisor`. Session thread, between collects.
 *   destroy()    free everything. Required. Never fails.
 *
 * Every hook returns a loupe_status; on failure the host reads last_error(instance).
 * A hook that fails in setup/start fails or skips the plugin (the profile decides);
 * in consume/collect it is counted, and after repeated failures the instance is disabled.
 */
#ifndef LOUPE_ABI_PLUGIN_H
#define LOUPE_ABI_PLUGIN_H

#include "loupe/abi/common.h"
#include "loupe/abi/config.h"
#include "loupe/abi/host.h"
#include "loupe/abi/records.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum loupe_plugin_kind {
  LOUPE_KIND_PROFILER = 1,
  LOUPE_KIND_SINK = 2,
} loupe_plugin_kind;

typedef struct loupe_plugin loupe_plugin; /* opaque, plugin-owned instance */

/* Facts about the session, host-owned until destroy(). */
typedef struct loupe_session_info {
  uint32_t size;
  int32_t target_pid;         /* 0 = system-wide */
  const char* target_command; /* the command loupe started, or NULL */
  double duration_s;          /* 0 = until the target exits or a signal */
  double interval_s;          /* 0 = only the final report */
  const char* output_dir;     /* exists, 0700; sinks put files here */
  const char* instance_name;  /* unique name of this instance in the profile */
  uint64_t start_wall_ns;     /* CLOCK_REALTIME at session start */
  /* Appended (test with LOUPE_ABI_HAS_FIELD): LOUPE_SESSION_* bits. */
  uint32_t flags;
  uint32_t reserved;
  /*
   * Appended (test with LOUPE_ABI_HAS_FIELD): the session's process tree, a BPF hash map
   * the core owns (key __u32 tgid, value struct loupe_tree_entry, bpf/include/loupe/tree.h)
   * holding target_pid and every descendant, kept by the core from fork/exit. Host-owned:
   * open from setup() until destroy() returns; a plugin must not close or write it, and
   * takes its own reference with bpf_map__reuse_fd() (which dups it) before load, as
   * sdk::write_target_filter() does. Valid only when flags has LOUPE_SESSION_TREE (so a
   * zero-filled struct names no map); else -1. No tree (system-wide, `--no-follow`,
   * replay, the kernel refused the tracker, or an old host without the field): filter by
   * target_pid alone.
   */
  int32_t tree_map_fd;
  uint32_t reserved2;
  /*
   * Appended in ABI 1.3 (test with LOUPE_ABI_HAS_FIELD): the profiler instances of the
   * profile, in the order the profile lists them, named as records name them in
   * loupe_record.plugin ("latency", "latency#2"). A sink that groups records by producer
   * can present them in the order the user wrote; it must still expect records of other
   * producers (the host's own, "loupe"). Host-owned until destroy(); NULL when
   * n_profilers is 0.
   */
  const char* const* profilers;
  uint32_t n_profilers;
  uint32_t reserved3;
  /*
   * Appended in ABI 1.8 (test with LOUPE_ABI_HAS_FIELD): `[session] rotate`, seconds; 0 =
   * the session is one window. When set, a sink that writes files keeps, besides its
   * session-long output, what the interval (is_final = 0) records of the current window
   * add up to, and writes that into loupe_flush_args.window_dir when a window ends.
   * Interval stack records are deltas, so a window's files hold that window alone.
   */
  double rotate_s;
} loupe_session_info;

/*
 * LOUPE_SESSION_REPLAY: `loupe replay` feeds recorded ring records through the plugins'
 * decode callbacks; there is no kernel side. setup() runs as usual; start() must not load
 * or attach BPF and registers the same rings (same names, record type and version) with
 * map_fd, lost_map_fd and divisor_map_fd = -1. collect() should skip reading BPF maps.
 */
#define LOUPE_SESSION_REPLAY 0x1u
/*
 * LOUPE_SESSION_TREE: the target's descendants are part of the target ("follow", the
 * default for `loupe run -- CMD` and `--pid P`); tree_map_fd names the map that lists them.
 */
#define LOUPE_SESSION_TREE 0x2u

typedef struct loupe_setup_args {
  uint32_t size;
  uint32_t reserved;
  const loupe_host_services* services;
  const loupe_config* config;
  const loupe_session_info* session;
} loupe_setup_args;

typedef struct loupe_start_args {
  uint32_t size;
  uint32_t reserved;
} loupe_start_args;

typedef struct loupe_collect_args {
  uint32_t size;
  uint32_t is_final;
  uint64_t window_start_ns; /* CLOCK_REALTIME; this interval (or the whole session) */
  uint64_t window_end_ns;
} loupe_collect_args;

typedef struct loupe_stop_args {
  uint32_t size;
  uint32_t reserved;
  uint64_t drain_deadline_ns; /* CLOCK_MONOTONIC */
} loupe_stop_args;

typedef struct loupe_flush_args {
  uint32_t size;
  uint32_t is_final;
  /*
   * Appended in ABI 1.8 (test with LOUPE_ABI_HAS_FIELD). Non-NULL: a window of a rotating
   * session ended with the records consumed before this call; write its files into this
   * directory (it exists, empty, host-owned for the call) and start the next window empty.
   * The host publishes the directory (renames it into place) once every sink returned, so
   * a reader never sees a window half written. NULL: an ordinary flush.
   */
  const char* window_dir;
  uint64_t window_start_ns; /* CLOCK_REALTIME: the window's span, when window_dir is set */
  uint64_t window_end_ns;
} loupe_flush_args;

/*
 * ABI 1.9: the host thins a profiler to stay within `[session] max_cpu_percent`. From this
 * call on, the plugin's BPF side keeps each event with probability 1/divisor (chosen at
 * random per event, so no periodic work falls into lockstep) and counts each kept event as
 * `divisor` events and `divisor` times its measured time: what the plugin reports stays an
 * estimate of the whole, never a silent fraction of it. divisor 1 = every event, as before
 * the first call. An event is weighed by the divisor in force when it was kept, so a change
 * mid-window leaves no bias. The host says every change in its own records; the plugin
 * says how many events it skipped (a health row). A plugin that cannot thin a mode it runs
 * in returns LOUPE_ERR_UNSUPPORTED and is not asked again.
 */
typedef struct loupe_rate_args {
  uint32_t size;
  uint32_t divisor; /* >= 1 */
} loupe_rate_args;

typedef struct loupe_plugin_descriptor {
  uint32_t size;      /* sizeof(loupe_plugin_descriptor) as the plugin compiled it */
  uint16_t abi_major; /* LOUPE_ABI_MAJOR the plugin was built with */
  uint16_t abi_minor;
  uint32_t kind;                       /* loupe_plugin_kind */
  uint32_t config_key_size;            /* sizeof(loupe_config_key) as the plugin compiled it */
  const char* name;                    /* [a-z0-9_-]+, unique among loaded plugins */
  const char* version;                 /* the plugin's own semver */
  const char* description;             /* one line */
  const loupe_config_key* config_keys; /* static; may be NULL when n_config_keys == 0 */
  uint32_t n_config_keys;
  uint32_t reserved;

  /* Required. On success *out is the new instance. `args` and everything it points to
   * stay valid until destroy(). */
  int (*setup)(const loupe_setup_args* args, loupe_plugin** out);
  /* Required for profilers, optional for sinks. */
  int (*start)(loupe_plugin* self, const loupe_start_args* args);
  /* Optional. */
  int (*collect)(loupe_plugin* self, const loupe_collect_args* args);
  /* Optional. */
  int (*stop)(loupe_plugin* self, const loupe_stop_args* args);
  /* Required for sinks. `rec` host-owned for the call only. */
  int (*consume)(loupe_plugin* self, const loupe_record* rec);
  /* Optional. */
  int (*flush)(loupe_plugin* self, const loupe_flush_args* args);
  /* Required. */
  void (*destroy)(loupe_plugin* self);
  /* Required. Plugin-owned text valid until the next hook call on `self`. May be called
   * with self == NULL after a failed setup(): then it describes that failure. */
  const char* (*last_error)(loupe_plugin* self);
  /* Appended in ABI 1.9 (test with LOUPE_ABI_HAS_FIELD). Optional, profilers only: NULL =
   * the plugin cannot be thinned, and a budget passed says so. See loupe_rate_args. */
  int (*set_rate)(loupe_plugin* self, const loupe_rate_args* args);
} loupe_plugin_descriptor;

typedef const loupe_plugin_descriptor* (*loupe_plugin_entry_fn)(void);

#ifdef __cplusplus
}
#endif

#endif /* LOUPE_ABI_PLUGIN_H */
