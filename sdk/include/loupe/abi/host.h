/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The services table the host hands to every plugin instance in loupe_setup_args.
 *
 * Ownership: the table and `host` are host-owned and valid from setup() until destroy()
 * returns. Every function takes `host` first. Unless a field says otherwise a function is
 * thread-safe, never blocks on I/O, and returns a loupe_status; on failure
 * last_error(host) describes the failure of the most recent call on the calling thread.
 *
 * Fields after the ABI 1.0 set must be tested with LOUPE_ABI_HAS_FIELD before use.
 */
#ifndef LOUPE_ABI_HOST_H
#define LOUPE_ABI_HOST_H

#include "loupe/abi/common.h"
#include "loupe/abi/config.h"
#include "loupe/abi/records.h"

#ifdef __cplusplus
extern "C" {
#endif

struct bpf_object;
struct bpf_program;
struct bpf_link;

typedef struct loupe_host loupe_host; /* opaque, one per plugin instance */

typedef enum loupe_clock {
  LOUPE_CLOCK_MONOTONIC = 1,
  LOUPE_CLOCK_BOOTTIME = 2, /* what bpf_ktime_get_boot_ns() returns */
  LOUPE_CLOCK_REALTIME = 3,
} loupe_clock;

/* ---- ring buffers ----------------------------------------------------------------- */

/* What losing a record of this ring means; drives the default backpressure policy. */
typedef enum loupe_ring_category {
  LOUPE_RING_DROPPABLE_SAMPLE = 1, /* statistically sampled data: dropping is fine if counted */
  LOUPE_RING_CORRELATED_PAIR = 2,  /* half of a pair: a drop makes the partner unmatched */
  LOUPE_RING_MUST_KEEP = 3,        /* rare, important events (outliers, errors) */
} loupe_ring_category;

/* What the core does when the queue behind the ring is full. Never: stall the reader. */
typedef enum loupe_backpressure {
  LOUPE_BP_DEFAULT = 0,     /* chosen from the category */
  LOUPE_BP_DROP_NEWEST = 1, /* drop and count */
  LOUPE_BP_COALESCE = 2,    /* keep per-key counts (coalesce_key), drop the detail */
  LOUPE_BP_COUNT_ONLY = 3,  /* degrade the whole ring to counting records until pressure clears */
} loupe_backpressure;

/*
 * Every ring record starts with this header (bpf/include/loupe/emit.bpf.h writes it).
 * The core's minimal decode checks type, version and len before any plugin code sees
 * the bytes; records that fail are counted as malformed and skipped.
 */
typedef struct loupe_ring_header {
  uint16_t type;    /* the plugin's record type */
  uint16_t version; /* the plugin's record layout version */
  uint32_t len;     /* total record length including this header */
} loupe_ring_header;

typedef struct loupe_ring_spec {
  uint32_t size;
  int32_t map_fd;          /* a BPF_MAP_TYPE_RINGBUF; the plugin keeps it open until destroy() */
  const char* name;        /* borrowed; unique within the plugin ("outliers") */
  uint16_t record_type;    /* expected loupe_ring_header.type */
  uint16_t record_version; /* expected loupe_ring_header.version */
  uint32_t min_len;        /* smallest valid len, >= sizeof(loupe_ring_header) */
  uint32_t max_len;        /* largest valid len */
  uint32_t category;       /* loupe_ring_category */
  uint32_t policy;         /* loupe_backpressure */
  /* A BPF per-CPU array, key 0, __u64: reserve failures counted by the BPF side
   * (emit.bpf.h does it). -1 when the plugin has none; then kernel losses are unknown
   * and reported as such. */
  int32_t lost_map_fd;
  /* A BPF array, key 0, __u32 sampling divisor the BPF side honours (emit 1 in N).
   * The core raises it under sustained drops and lowers it when pressure clears.
   * -1 when the plugin has none. */
  int32_t divisor_map_fd;
  /*
   * Required. Turns one record into zero or more loupe_records via services->emit.
   * Called on a core worker thread (one at a time per ring, possibly concurrent with
   * collect()). `data` is borrowed for the call and already passed the header checks.
   * Return LOUPE_OK, or an error to have the record counted as a decode error.
   */
  int (*decode)(void* user, const void* data, uint32_t len);
  /* Optional, for LOUPE_BP_COALESCE: a key that identifies records that may be merged.
   * Called on the reader thread: must be cheap and must not block. */
  uint64_t (*coalesce_key)(void* user, const void* data, uint32_t len);
  void* user; /* passed back unchanged */
} loupe_ring_spec;

/* ---- user-stack unwinding (ABI 1.2) ---------------------------------------------- */

typedef enum loupe_user_arch {
  LOUPE_ARCH_X86_64 = 1,
} loupe_user_arch;

#define LOUPE_USER_REGS_MAX 33

/*
 * A thread's user registers at the moment its stack was copied, in the architecture's
 * DWARF register numbering (x86-64: 0 rax, 1 rdx, 2 rcx, 3 rbx, 4 rsi, 5 rdi, 6 rbp,
 * 7 rsp, 8-15 r8-r15, 16 rip). bpf/include/loupe/ustack.bpf.h captures them.
 */
typedef struct loupe_user_regs {
  uint32_t size; /* sizeof(loupe_user_regs) as the caller compiled it */
  uint32_t arch; /* loupe_user_arch */
  uint64_t mask; /* bit i set: regs[i] is valid */
  uint64_t regs[LOUPE_USER_REGS_MAX];
} loupe_user_regs;

/* Why an unwind stopped. Every value but OK means the stack may lack its outer frames;
 * the frames found up to that point are still written. */
typedef enum loupe_unwind_status {
  LOUPE_UNWIND_OK = 0,              /* reached the outermost frame (CFI ends the chain) */
  LOUPE_UNWIND_NO_CFI = 1,          /* no CFI for a frame's pc, or CFI that cannot be evaluated */
  LOUPE_UNWIND_STACK_EXHAUSTED = 2, /* the next frame lies beyond the copied stack slice */
  LOUPE_UNWIND_BAD_MEMORY = 3,      /* CFI asked for memory outside the slice (garbage state) */
  LOUPE_UNWIND_UNMAPPED_PC = 4,     /* a pc outside every known executable mapping */
  LOUPE_UNWIND_MAX_DEPTH = 5,       /* `max` frames were written before the end */
  LOUPE_UNWIND_NO_PROCESS = 6,      /* the process's mappings could not be read (gone) */
  LOUPE_UNWIND_UNSUPPORTED = 7,     /* architecture or host build without an unwinder */
  LOUPE_UNWIND_STATUS_COUNT = 8,
} loupe_unwind_status;

/* ---- the services table ----------------------------------------------------------- */

typedef struct loupe_host_services {
  uint32_t size;
  uint16_t abi_major;
  uint16_t abi_minor;
  loupe_host* host;

  /* Logging. `msg` borrowed. Any thread; never blocks. */
  void (*log)(loupe_host* host, uint32_t level, const char* msg);

  /* Config access on a validated table (see config.h). Values are already type- and
   * range-checked against the declared schema and defaults are applied, so a declared
   * key always has a value unless it has no default and the profile omitted it
   * (then LOUPE_ERR_NOT_FOUND). Returned strings and sub-tables are host-owned until
   * destroy(). Session thread or any thread; never blocks. */
  int (*config_bool)(const loupe_config* cfg, const char* key, int* out);
  int (*config_int)(const loupe_config* cfg, const char* key, int64_t* out);
  int (*config_float)(const loupe_config* cfg, const char* key, double* out);
  int (*config_string)(const loupe_config* cfg, const char* key, const char** out);
  int (*config_list_len)(const loupe_config* cfg, const char* key, uint32_t* out);
  int (*config_list_string)(const loupe_config* cfg, const char* key, uint32_t idx,
                            const char** out);
  int (*config_list_int)(const loupe_config* cfg, const char* key, uint32_t idx, int64_t* out);
  int (*config_list_table)(const loupe_config* cfg, const char* key, uint32_t idx,
                           const loupe_config** out);

  /* Kernel feature query from the cached preflight ("kprobe", "fentry", "tracepoint",
   * "raw_tp", "tp_btf", "uprobe", "perf_event", "ringbuf", "stack_trace", "btf", ...).
   * Returns 1 available, 0 not, <0 unknown feature. `reason` (may be NULL) receives a
   * host-owned static explanation. Tests may force features off. Never blocks. */
  int (*feature_available)(loupe_host* host, const char* feature, const char** reason);

  /* Whether an attach target exists, checked before loading (design check 4).
   * tracepoint: "category:name"; ksym: kernel function name. Returns 1/0. May read
   * tracefs or /proc/kallsyms (blocking, session thread only). */
  int (*tracepoint_exists)(loupe_host* host, const char* category_colon_name);
  int (*ksym_exists)(loupe_host* host, const char* name);

  /* Load an opened object: the host captures the verifier log per program and, on
   * failure, puts the useful tail (and the program's name) in last_error and the log.
   * Session thread only; blocks while the kernel verifies. */
  int (*bpf_load)(loupe_host* host, struct bpf_object* obj);
  /* Attach with bpf_program__attach() and record the per-probe result under `probe`
   * (borrowed label shown in reports, e.g. "sys_enter_read"). The host owns the link and
   * destroys it when the session detaches, before stop(). Session thread only. */
  int (*bpf_attach)(loupe_host* host, struct bpf_program* prog, const char* probe);
  /* The plugin attached itself (uprobe with options, perf events...) and hands the link
   * over: the host owns and destroys it as above. A NULL link records a failed attach
   * with `errno_value`. Session thread only. */
  int (*bpf_adopt_link)(loupe_host* host, struct bpf_link* link, struct bpf_program* prog,
                        const char* probe, int errno_value);

  /* Ring registration: the core owns the draining threads from start() until stop().
   * Call during start(), after load. `spec` and its strings are borrowed (copied). */
  int (*ring_register)(loupe_host* host, const loupe_ring_spec* spec);

  /* Emit a record towards every sink. Deep-copied before returning; never blocks (a full
   * bus drops and counts). Any thread. */
  int (*emit)(loupe_host* host, const loupe_record* rec);

  /* Resolve `n` addresses of `pid` (0 = kernel) into `out` (caller-allocated, n long).
   * Strings in `out` are host-owned until destroy(). Frames that cannot be resolved keep
   * module+offset and say why in `resolution`. Any thread; may block reading /proc and
   * ELF files on a cache miss. */
  int (*symbolize)(loupe_host* host, uint32_t pid, uint32_t frame_kind, const uint64_t* addrs,
                   uint32_t n, loupe_frame* out);

  /* Clocks. Any thread; never blocks. */
  uint64_t (*now_ns)(loupe_host* host, uint32_t clock);
  uint64_t (*boot_to_wall_ns)(loupe_host* host, uint64_t boottime_ns);

  /* Text of the last failure of a services call on the calling thread. Host-owned until
   * the next call on that thread. */
  const char* (*last_error)(loupe_host* host);

  /* Name a data address of `pid` (a global variable, e.g. a lock): `out` gets the object
   * symbol covering it (resolution as for symbolize). Any thread; may block on a miss. */
  int (*symbolize_data)(loupe_host* host, uint32_t pid, uint64_t addr, loupe_frame* out);
  /* Tell the symbolizer a process exec'd, exited or changed its mappings: its cached maps
   * are re-read on next use while it lives, and kept as they were once it is gone (its
   * stacks stay nameable). Any thread; never blocks. */
  void (*symbols_invalidate)(loupe_host* host, uint32_t pid);

  /* ABI 1.2. bpf_adopt_link, plus what the link is attached to in the kernel's own spelling
   * (`target` borrowed, may be NULL): "uprobe:PATH+0xOFF", "uretprobe:PATH+0xOFF",
   * "tracepoint:NAME", "kprobe:FUNC". Kernels before 6.6 do not name a perf-event link's
   * target in its link info; `loupe run --stats` and `loupe bench` then take this one.
   * Session thread only. */
  int (*bpf_adopt_link_at)(loupe_host* host, struct bpf_link* link, struct bpf_program* prog,
                           const char* probe, const char* target, int errno_value);

  /* ABI 1.2. Unwind a user stack from a copy (perf --call-graph dwarf style): `regs` at
   * the sample, `stack` the `stack_len` bytes copied from regs[sp] upwards (both borrowed
   * for the call). Uses the .eh_frame/.debug_frame CFI of the files `pid` maps (read
   * through /proc/PID/root or /proc/PID/map_files, cached per process until it execs or
   * symbols_invalidate). Writes up to `max` code addresses into `out`, leaf first: the
   * pc, then return addresses, as symbolize() takes them; `*n_out` gets the count and
   * `*reason` a loupe_unwind_status. Returns LOUPE_OK whenever `*reason` was set (a
   * partial stack is not a failure), LOUPE_ERR_INVALID_ARG on bad arguments. Any thread;
   * calls are serialized with symbolize() (one lock) and may block on a cache miss
   * (maps, ELF files); a warm unwind costs tens of microseconds. */
  int (*unwind_user)(loupe_host* host, uint32_t pid, const loupe_user_regs* regs, const void* stack,
                     uint32_t stack_len, uint64_t* out, uint32_t max, uint32_t* n_out,
                     uint32_t* reason);

  /* ABI 1.5. Native unwind tables for the in-kernel unwinder (bpf/include/loupe/unwind.bpf.h):
   * from now until destroy() the host keeps `rows_fd` (its loupe_unwind_rows: an array of
   * loupe_unwind_row, or of loupe_unwind_row_v1 for a plugin of ABI 1.5-1.10, each file's
   * rows followed by its page index) and `procs_fd`
   * (loupe_unwind_procs: loupe_unwind_proc by tgid) filled for every process of the
   * session's target (the command or --pid, and its descendants when following), from the
   * .eh_frame of the files they map, rewriting a process's entry when its code mappings
   * change; a system-wide session fills them for every process it finds in /proc (the
   * busiest first, within a build budget per second). The maps stay the plugin's
   * (borrowed fds, loaded). Call during start(), after load; session thread only.
   * LOUPE_ERR_INVALID_ARG when the maps do not have those layouts, LOUPE_ERR_UNSUPPORTED
   * in replay. */
  int (*unwind_tables_attach)(loupe_host* host, int rows_fd, int procs_fd);

  /* ABI 1.6. The files of the same tables (loupe_unwind_files: loupe_unwind_file by
   * loupe_unwind_file_key), for the consumer whose loupe_unwind_procs is `procs_fd`
   * (attached first): the host keeps an entry for every file whose rows it wrote, so the
   * unwinder finds a file's rows from the VMA (bpf_find_vma) in a process that has no
   * entry yet, such as a shell loop's short-lived commands. Same threading and errors. */
  int (*unwind_files_attach)(loupe_host* host, int procs_fd, int files_fd);

  /* ABI 1.7. Python frames for the same consumer (unwind.bpf.h's loupe_python_procs,
   * loupe_python_codes and loupe_python_code_ring): the host writes a loupe_python_proc for
   * every process of the target that runs a CPython it has a layout for (and sets
   * LOUPE_UNWIND_PROC_PYTHON in its loupe_unwind_proc), reads each code object the ring
   * names while its process lives, and symbolize() then names the tagged frames
   * (LOUPE_PYTHON_IS_FRAME) as LOUPE_FRAME_PYTHON. Same threading and errors. */
  int (*unwind_python_attach)(loupe_host* host, int procs_fd, int python_procs_fd, int codes_fd,
                              int ring_fd);

  /* ABI 1.10. As symbolize(), for a whole stack whose frames may stand for several: a
   * compiled Java frame expands into the methods inlined at its pc, innermost first, then
   * the compiled method itself. Writes at most `max_out` frames into `out` and their count
   * into `*n_out` (frames past max_out are cut from the root end). Same threading. */
  int (*symbolize_stack)(loupe_host* host, uint32_t pid, uint32_t frame_kind, const uint64_t* addrs,
                         uint32_t n, loupe_frame* out, uint32_t max_out, uint32_t* n_out);

  /* ABI 1.10. The session's unwinder: the in-kernel unwinder's shared maps
   * (bpf/include/loupe/unwind.bpf.h: rows, process and file entries, each runtime's
   * entries, the LRU and ring of first sightings), created by the host on the first call
   * (sized by `[session] unwind_rows`) and kept filled for the session's processes. Writes
   * them, by the names a BPF object declares them under, into `*maps` and their count into
   * `*n`; host-owned until destroy(). A plugin makes its object's maps of those names the
   * session's with bpf_map__reuse_fd() before load (sdk::size_unwind_maps does) and never
   * writes them: one copy of the tables for every plugin, and the runtimes (Python, Java)
   * that only the session's maps get. Per-plugin state (stack ids, counters, per-CPU
   * scratch) stays in the plugin's object: programs of two plugins nest on one CPU.
   * LOUPE_ERR_UNSUPPORTED when the session keeps none (a replay, a kernel that refused the
   * maps): the plugin keeps its own copy through unwind_tables_attach (native frames).
   * Setup thread. */
  int (*unwinder_maps)(loupe_host* host, const struct loupe_map_ref** maps, uint32_t* n);
} loupe_host_services;

/* A BPF map the host shares, by the name a BPF object declares it under. */
typedef struct loupe_map_ref {
  const char* name;
  int32_t fd;
  uint32_t reserved;
} loupe_map_ref;

#ifdef __cplusplus
}
#endif

#endif /* LOUPE_ABI_HOST_H */
