/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Records: the one data model between profilers and sinks.
 *
 * A profiler builds a record on its own stack (every pointer borrowed) and hands it to
 * loupe_host_services.emit(); the host deep-copies it before emit() returns, so the
 * profiler may free or reuse everything afterwards. A sink receives a record in
 * loupe_plugin_descriptor.consume(); every pointer in it is host-owned and valid only
 * for the duration of that call (copy what you keep).
 *
 * Sinks know records, never plugins: a sink must not switch on `plugin`. The record's
 * `kind` and its typed payload carry all meaning; `plugin` and `name` are for display.
 * The JSON rendering of records is versioned in docs/records.md.
 */
#ifndef LOUPE_ABI_RECORDS_H
#define LOUPE_ABI_RECORDS_H

#include "loupe/abi/common.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum loupe_record_kind {
  LOUPE_RECORD_HISTOGRAM = 1,
  LOUPE_RECORD_STACK_SAMPLE = 2,
  LOUPE_RECORD_EVENT = 3,
  LOUPE_RECORD_METRIC = 4, /* counter or gauge */
  LOUPE_RECORD_HEALTH = 5,
  LOUPE_RECORD_FINDING = 6, /* ABI 1.4: what stands out, with its evidence */
} loupe_record_kind;

typedef struct loupe_label {
  const char* key;
  const char* value;
} loupe_label;

/* ---- histogram ------------------------------------------------------------------ */

typedef enum loupe_bucket_scheme {
  /* bucket 0 holds 0, bucket i >= 1 values in (2^(i-2), 2^(i-1)]: the upper bound is
   * inclusive, as in Prometheus native histograms (schema 0, index i - 1) and OpenTelemetry
   * exponential histograms (scale 0). As integers, (512, 1024] is loupe_bucket [513, 1025). */
  LOUPE_BUCKETS_LOG2 = 1,
  /* every (2^e, 2^(e+1)] split in `sub_buckets` equal parts (HdrHistogram-like), upper
   * bounds inclusive; below sub_buckets one bucket per integer. Linear parts, not the
   * geometric ones of a native schema: only the powers of two are common bounds. */
  LOUPE_BUCKETS_LOG2_LINEAR = 2,
  /* explicit bounds given per bucket. */
  LOUPE_BUCKETS_EXPLICIT = 3,
} loupe_bucket_scheme;

typedef struct loupe_bucket {
  uint64_t lower; /* inclusive: the integers in [lower, upper) */
  uint64_t upper; /* exclusive; UINT64_MAX = open */
  uint64_t count;
} loupe_bucket;

typedef struct loupe_percentile {
  double quantile; /* 0.5, 0.9, 0.95, 0.99, 0.999 */
  uint64_t value;  /* the estimate (bucket midpoint, clamped to [min, max]) */
  uint64_t lower;  /* the true value lies in [lower, upper): the error bound */
  uint64_t upper;
} loupe_percentile;

typedef struct loupe_histogram {
  uint32_t size;        /* sizeof(loupe_histogram) as compiled by the producer */
  uint32_t scheme;      /* loupe_bucket_scheme */
  uint32_t sub_buckets; /* LOG2_LINEAR only */
  uint32_t n_buckets;
  const char* unit;            /* "ns", "bytes", ... */
  const loupe_bucket* buckets; /* only non-empty buckets need be present, ascending */
  uint64_t count;
  uint64_t sum;
  uint64_t min;
  uint64_t max;
  /* Filled by the host when it copies the record (producers leave them 0/NULL): sinks
   * always receive p50, p90, p95, p99 and p99.9 with their bucket bounds. */
  const loupe_percentile* percentiles;
  uint32_t n_percentiles;
} loupe_histogram;

/* ---- stack sample --------------------------------------------------------------- */

typedef enum loupe_frame_kind {
  LOUPE_FRAME_USER = 1,
  LOUPE_FRAME_KERNEL = 2,
  LOUPE_FRAME_JIT = 3,
  /* ABI 1.7: a function of a CPython interpreter's program (the in-kernel unwinder's
   * Python frames): `symbol` is its qualified name, `module` its source file, `offset` the
   * line being run (0: unknown), `address` the code object's. */
  LOUPE_FRAME_PYTHON = 4,
  /* ABI 1.10: a method of a Java program (the in-kernel unwinder's HotSpot frames): as a
   * Python frame, `symbol` its name (package.Class.method), `module` its source file,
   * `offset` its line (0: unknown). An inlined method is a frame of its own. */
  LOUPE_FRAME_JAVA = 5,
  /* ABI 1.12: a JavaScript function run by V8 (Node.js; the in-kernel unwinder's V8
   * frames): `symbol` its name ("<anonymous>" when it has none), `module` its script, `offset`
   * its line (0: unknown). */
  LOUPE_FRAME_JS = 6,
} loupe_frame_kind;

/* A frame of a program a runtime runs (Python, Java, JavaScript): named by its source,
 * `module` the file and `offset` the line, not an address in a module. */
#define LOUPE_FRAME_IS_SOURCE(kind) \
  ((kind) == LOUPE_FRAME_PYTHON || (kind) == LOUPE_FRAME_JAVA || (kind) == LOUPE_FRAME_JS)

typedef enum loupe_frame_resolution {
  LOUPE_RESOLVED_SYMTAB = 1, /* ELF .symtab */
  LOUPE_RESOLVED_DYNSYM = 2, /* ELF .dynsym only (stripped binary) */
  LOUPE_RESOLVED_KALLSYMS = 3,
  LOUPE_RESOLVED_PERF_MAP = 4, /* /tmp/perf-PID.map */
  LOUPE_RESOLVED_JITDUMP = 5,
  /* ABI 1.2: no symbol covers the address; `symbol` names the function by the .eh_frame
   * FDE that holds it ("liblzma.so.5.4.1 [fn@0x15b40]": module file name and the FDE's
   * link-time start), `offset` is from that start. Frames of one function share a name. */
  LOUPE_RESOLVED_EH_FRAME = 6,
  LOUPE_RESOLVED_PYTHON = 7,       /* ABI 1.7: read from the running interpreter's code object */
  LOUPE_RESOLVED_RUNTIME = 8,      /* ABI 1.10: read from a runtime's own structures (a JVM's) */
  LOUPE_UNRESOLVED_NO_SYMBOL = 16, /* module known, no symbol covers the address */
  LOUPE_UNRESOLVED_NO_MODULE = 17, /* address outside every known mapping */
  LOUPE_UNRESOLVED_PROCESS_GONE = 18,
  LOUPE_UNRESOLVED_NOT_ATTEMPTED = 19,
} loupe_frame_resolution;

typedef struct loupe_frame {
  uint64_t address;
  const char* symbol;  /* NULL when unresolved */
  const char* module;  /* path or [kernel] / [module_name]; NULL when unknown */
  uint64_t offset;     /* from symbol start when resolved, else from module start */
  uint32_t kind;       /* loupe_frame_kind */
  uint32_t resolution; /* loupe_frame_resolution */
} loupe_frame;

typedef struct loupe_value {
  const char* name; /* "samples", "alloc_bytes", "wait_ns", ... */
  const char* unit; /* "count", "bytes", "ns" */
  int64_t value;
} loupe_value;

typedef struct loupe_stack_sample {
  uint32_t size;
  uint32_t n_frames;
  const loupe_frame* frames; /* leaf first */
  const loupe_value* values;
  uint32_t n_values;
} loupe_stack_sample;

/* ---- event ---------------------------------------------------------------------- */

typedef enum loupe_field_type {
  LOUPE_FIELD_I64 = 1,
  LOUPE_FIELD_U64 = 2,
  LOUPE_FIELD_F64 = 3,
  LOUPE_FIELD_STR = 4,
} loupe_field_type;

typedef struct loupe_field {
  const char* key;
  uint32_t type; /* loupe_field_type: selects the member below */
  uint32_t reserved;
  union {
    int64_t i64;
    uint64_t u64;
    double f64;
    const char* str;
  } v;
} loupe_field;

typedef struct loupe_event {
  uint32_t size;
  uint32_t n_fields;
  uint64_t timestamp_ns; /* CLOCK_REALTIME ns (use services->boot_to_wall for BPF times) */
  const loupe_field* fields;
  const loupe_frame* frames; /* optional stack, leaf first */
  uint32_t n_frames;
} loupe_event;

/* ---- counter / gauge ------------------------------------------------------------ */

typedef enum loupe_metric_type {
  LOUPE_METRIC_COUNTER = 1, /* a count over the record's window (see window_start_ns) */
  LOUPE_METRIC_GAUGE = 2,
} loupe_metric_type;

typedef struct loupe_metric {
  uint32_t size;
  uint32_t type; /* loupe_metric_type */
  const char* unit;
  double value;
} loupe_metric;

/* ---- health --------------------------------------------------------------------- */

typedef enum loupe_health_severity {
  LOUPE_HEALTH_OK = 0,    /* a counter that is zero or informative */
  LOUPE_HEALTH_WARN = 1,  /* data was lost or degraded; the report is incomplete */
  LOUPE_HEALTH_ERROR = 2, /* a component failed */
} loupe_health_severity;

/* Health is a first-class stream: losses, unmatched pairs, stack failures, queue depth.
 * `component` says where (a ring, a queue, a probe); `name` what (lost_kernel, ...). */
/* What a WARN's `value` did to the data (ABI 1.11), so a verdict can tell a hole from a
 * blur: LOST, events or records that are not in the report at all (a full ring, a full
 * map); DEGRADED, events that are in it less exactly (a stack stopped early, a block whose
 * switch-in was missed and its time recovered). 0: unsaid (a producer of ABI 1.10). */
typedef enum loupe_health_effect {
  LOUPE_HEALTH_EFFECT_UNSAID = 0,
  LOUPE_HEALTH_EFFECT_LOST = 1,
  LOUPE_HEALTH_EFFECT_DEGRADED = 2,
} loupe_health_effect;

/* Health is a first-class stream: losses, unmatched pairs, stack failures, queue depth.
 * `component` says where (a ring, a queue, a probe); `name` what (lost_kernel, ...). */
typedef struct loupe_health {
  uint32_t size;
  uint32_t severity; /* loupe_health_severity */
  const char* component;
  uint64_t value;
  const char* message; /* optional human explanation */
  /* ABI 1.11: the whole `value` is a part of, in the same unit ("3 of 196 stacks"), for a
   * share; 0 when there is none (a count of failures without a count of tries). */
  uint64_t whole;
  const char* whole_unit; /* a plural noun: "stacks", "samples", "records"; optional */
  uint32_t effect;        /* loupe_health_effect */
  uint32_t reserved;
} loupe_health;

/* ---- finding (ABI 1.4) ---------------------------------------------------------- */

/* What stands out in a profiler's own data, said by the profiler, which knows what its
 * numbers mean (a lock's waiters and their lifetimes, a leak's age, a device's queue): one
 * sentence with the figures it rests on, and those figures again as typed fields so a
 * program can check them. Emitted with the final report only; a rule that finds nothing
 * emits nothing. Each rule is documented in its plugin's README under its `rule` id.
 * Sinks show findings beside their own generic ones (dominant functions, long tails,
 * losses) without knowing the plugin. */
typedef struct loupe_finding {
  uint32_t size;
  uint32_t n_evidence;
  const char* rule;            /* stable id, e.g. "lock_contention"; required */
  const char* statement;       /* one sentence with its numbers; required */
  const loupe_field* evidence; /* the figures the statement rests on, e.g. wait_ns, share */
  double weight; /* 0..1, the share of its whole the finding concerns: orders findings */
} loupe_finding;

/* ---- the record ----------------------------------------------------------------- */

typedef struct loupe_record {
  uint32_t size;
  uint32_t kind;      /* loupe_record_kind: selects which payload pointer is set */
  const char* plugin; /* set by the host from the emitting instance; producers leave NULL */
  const char* name;   /* what is measured, e.g. "latency", "syscalls"; required */
  const loupe_label* labels;
  uint32_t n_labels;
  uint32_t is_final; /* 1 for the end-of-session report, 0 for interval reports */
  /* The window the values cover, CLOCK_REALTIME ns; filled by the host (this report's) when
   * producers leave 0. Running totals start at the session's start
   * (loupe_session_info.start_wall_ns), an interval's increments at the interval's start:
   * sinks tell the two apart by it (docs/records.md, "Windows"). */
  uint64_t window_start_ns;
  uint64_t window_end_ns;
  const loupe_histogram* histogram;
  const loupe_stack_sample* stack;
  const loupe_event* event;
  const loupe_metric* metric;
  const loupe_health* health;
  /* ABI 1.4; read only when size covers it (LOUPE_ABI_HAS_FIELD). */
  const loupe_finding* finding;
} loupe_record;

#ifdef __cplusplus
}
#endif

#endif /* LOUPE_ABI_RECORDS_H */
