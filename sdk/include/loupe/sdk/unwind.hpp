// SPDX-License-Identifier: Apache-2.0
//
// The user-space half of the in-kernel unwinder (bpf/include/loupe/unwind.bpf.h), for any
// stack-taking plugin: size its maps before load, hand them to the host after load (which
// then keeps the target's unwind tables in them), and report how the walks ended.
//
//   // setup(), after open:
//   sdk::size_unwind_maps(skel, tables ? rows : 0, max_stacks);
//   // start(), after load:
//   if (!host.attach_unwind_tables(bpf_map__fd(rows), bpf_map__fd(procs))) throw ...;
//   // collect(): sdk::emit_unwind_health(host, "offcpu", bpf_map__fd(stats), ...);
//   // user stacks: a StackMapFrames on loupe_unwind_stacks (the same value layout).
#ifndef LOUPE_SDK_UNWIND_HPP
#define LOUPE_SDK_UNWIND_HPP

#include <bpf/libbpf.h>
#include <linux/bpf.h>

#include <bpf/bpf.h>

#include <cstdint>
#include <cstring>
#include <string>

#include "loupe/abi/plugin.h"
#include "loupe/sdk/host.hpp"
#include "loupe/sdk/percpu.hpp"
#include "loupe/sdk/plugin.hpp"
#include "loupe/sdk/records.hpp"
#include "loupe/unwind.h"

namespace loupe::sdk {

// Rows of the in-kernel tables, for every plugin that offers unwind = "tables".
inline constexpr loupe_config_key kUnwindRowsKey = {
    "unwind_rows",
    LOUPE_CFG_INT,
    0,
    "0",
    "unwind = \"tables\" on a host without the session's unwinder (before ABI 1.10, or its "
    "maps refused): this plugin's own table rows (8 bytes each); 0 = 1048576 for a command or "
    "--pid, 2097152 system-wide. With the session's unwinder (the default), `[session] "
    "unwind_rows` sizes the one table every plugin shares",
    0,
    16777216};

// Python functions in the in-kernel unwinder's stacks, for every plugin that offers it.
inline constexpr loupe_config_key kPythonFramesKey = {
    "python_frames",
    LOUPE_CFG_BOOL,
    0,
    "true",
    "unwind = \"tables\": stacks of a CPython 3.10-3.13 process name its Python functions "
    "(file and line) where the interpreter's evaluation loop ran them, read from the running "
    "interpreter without restarting it; false: native frames only",
    0,
    0};
inline bool python_frames(const Config& cfg) {
  return cfg.value_bool("python_frames");
}

// The rows to size the tables for: the key, or its default for this session's target.
inline std::uint32_t unwind_rows(const Config& cfg, const loupe_session_info* session) {
  const auto rows = static_cast<std::uint32_t>(cfg.value_int("unwind_rows"));
  if (rows) return rows < 1024 ? 1024 : rows;
  return session && session->target_pid > 0 ? 1048576u : 2097152u;
}

// The keys of plugins whose user stacks come from the kernel only (no stack copy to unwind
// in user space): the in-kernel tables by default, or the kernel's frame-pointer walk.
inline constexpr const char* kKernelUnwindChoices[] = {"tables", "fp", nullptr};
inline constexpr loupe_config_key kUnwindKeys[] = {
    {"unwind", LOUPE_CFG_STRING, 0, "\"tables\"",
     "user stacks by loupe's in-kernel unwinder with tables from each file's .eh_frame "
     "(tables: right with or without frame pointers, keeps the caller of a libc call), or by "
     "the kernel's frame-pointer walk (fp: cheaper, right only for code built with frame "
     "pointers)",
     0, 0, nullptr, 0, 0, kKernelUnwindChoices},
    kUnwindRowsKey,
    kPythonFramesKey,
};

// Whether this kernel runs the in-kernel unwinder (bpf_loop and bpf_find_vma, Linux 5.17+),
// as the session's preflight says (`loupe check` lists both; --disable-feature turns them
// off); else why not.
inline bool unwind_tables_supported(const Host& host, std::string* why) {
  for (const char* helper : {"bpf_loop", "find_vma"}) {
    std::string reason;
    if (!host.feature(helper, &reason)) {
      if (why) *why = std::string(helper) + ": " + reason;
      return false;
    }
  }
  return true;
}

// unwind = "tables" as configured and possible here: a kernel without the unwinder's
// helpers, or a host that cannot fill its tables, gets the frame-pointer walk, said once in
// the log, rather than a refused load.
inline bool use_unwind_tables(const Config& cfg, const Host& host, const std::string& plugin) {
  if (cfg.value_string("unwind") != "tables") return false;
  std::string why;
  if (!host.can_keep_unwind_tables())
    why = "the host keeps no unwind tables (it predates loupe ABI 1.5)";
  else if (unwind_tables_supported(host, &why))
    return true;
  host.warn(plugin + ": unwind = \"tables\" is not possible here (" + why +
            "): user stacks by frame pointers, whose callers of frameless functions are lost");
  return false;
}

// The kernel name the host gives the maps it shares (a map's name is at most 15 bytes), so
// a loaded object tells whether its unwinder maps are the session's.
inline constexpr const char kSessionMapPrefix[] = "ls_";

// Makes every map of an opened object that the session's unwinder offers (by name) the
// session's (bpf_map__reuse_fd, which takes its own reference): the walk then reads the
// tables, entries and runtimes the host keeps once for all plugins. Throws on a refusal.
// False when the host keeps no session unwinder (an older host, a replay, a kernel that
// refused its maps).
inline bool reuse_session_unwinder(bpf_object* obj, const Host& host) {
  const loupe_map_ref* refs = nullptr;
  std::uint32_t n = 0;
  if (!host.unwinder_maps(&refs, &n) || n == 0) return false;
  bpf_map* map;
  bpf_object__for_each_map(map, obj) {
    const char* name = bpf_map__name(map);
    for (std::uint32_t i = 0; i < n; ++i) {
      const loupe_map_ref& ref = refs[i];
      if (!ref.name || std::strcmp(ref.name, name) != 0) continue;
      if (const int err = bpf_map__reuse_fd(map, ref.fd); err != 0)
        throw Error(LOUPE_ERR_KERNEL, std::string("sharing the session's unwinder map ") + name +
                                          ": " + std::strerror(-err));
    }
  }
  return true;
}

// Sizes the unwinder's maps of an opened skeleton whose object includes unwind.bpf.h.
// `rows` 0: the unwinder is not used, every map shrinks to one entry (an unused
// unwind.bpf.h costs no memory). Otherwise room for `max_stacks` distinct stacks (1 KiB
// each, the plugin's own), and the shared maps: the session's when it keeps an unwinder
// (then `rows` and `python` are the session's business: `[session] unwind_rows`), else
// this object's own, with room for `rows` table rows (8 bytes each; libc alone has 28k)
// and, with `python`, the interpreters whose Python frames the walk records. Runtimes
// other than Python (HotSpot) need the session's unwinder: an older host names none.
template <typename Skel>
void size_unwind_maps(Skel* skel, const Host& host, std::uint32_t rows, std::uint32_t max_stacks,
                      bool python = true) {
  const bool on = rows > 0;
  bpf_map__set_max_entries(skel->maps.loupe_unwind_stacks, on ? max_stacks : 1);
  bpf_map__set_max_entries(skel->maps.loupe_unwind_slots, on ? max_stacks : 1);
  skel->rodata->loupe_unwind_max_stacks = on ? max_stacks : 1;
  if (on && reuse_session_unwinder(skel->obj, host)) return;
  const bool py = on && python;
  bpf_map__set_max_entries(skel->maps.loupe_unwind_rows, on ? rows : 1);
  bpf_map__set_max_entries(skel->maps.loupe_unwind_procs, on ? 1024 : 1);
  bpf_map__set_max_entries(skel->maps.loupe_unwind_files, on ? 4096 : 1);
  bpf_map__set_max_entries(skel->maps.loupe_hotspot_procs, 1);
  bpf_map__set_max_entries(skel->maps.loupe_v8_procs, 1);
  // Python frames: an interpreter per process, code objects seen (24 bytes each), and the
  // ring that tells user space of new ones (a page when unused: the smallest ring).
  bpf_map__set_max_entries(skel->maps.loupe_python_procs, py ? 1024 : 1);
  bpf_map__set_max_entries(skel->maps.loupe_runtime_seen, py ? 16384 : 64);
  bpf_map__set_max_entries(skel->maps.loupe_runtime_ring, py ? 256 * 1024 : 4096);
}

// Whether a loaded object's unwinder maps are the session's (nothing to hand over).
inline bool uses_session_unwinder(int rows_fd) {
  bpf_map_info info{};
  __u32 len = sizeof(info);
  return bpf_obj_get_info_by_fd(rows_fd, &info, &len) == 0 &&
         std::strncmp(info.name, kSessionMapPrefix, sizeof(kSessionMapPrefix) - 1) == 0;
}

// After load: hands the skeleton's unwinder maps to the host, which from then on keeps the
// tables of the session's processes in them (nothing to do when they are the session's).
// Throws when the host cannot.
template <typename Skel>
void attach_unwind_tables(const Host& host, Skel* skel) {
  if (uses_session_unwinder(bpf_map__fd(skel->maps.loupe_unwind_rows))) return;
  if (!host.attach_unwind_tables(bpf_map__fd(skel->maps.loupe_unwind_rows),
                                 bpf_map__fd(skel->maps.loupe_unwind_procs)))
    throw Error(LOUPE_ERR_UNSUPPORTED,
                "unwind = \"tables\": the host keeps no unwind tables: " + host.last_error());
  // An older host keeps no files: processes without an entry are walked by frame pointers.
  host.attach_unwind_files(bpf_map__fd(skel->maps.loupe_unwind_procs),
                           bpf_map__fd(skel->maps.loupe_unwind_files));
  // Python frames, unless size_unwind_maps() left their maps at one entry (switched off).
  // An older host names none: the walk then meets no interpreter and records native frames.
  if (bpf_map__max_entries(skel->maps.loupe_python_procs) > 1)
    host.attach_unwind_python(
        bpf_map__fd(skel->maps.loupe_unwind_procs), bpf_map__fd(skel->maps.loupe_python_procs),
        bpf_map__fd(skel->maps.loupe_runtime_seen), bpf_map__fd(skel->maps.loupe_runtime_ring));
}

// How the walks ended (loupe_unwind_stats), as health records "<component>/unwind_*" and
// two metrics (frames per stack; the share of frames unwound by frame pointers).
inline void emit_unwind_health(const Host& host, const std::string& component, int stats_fd,
                               bool is_final, std::uint64_t ws, std::uint64_t we) {
  std::uint32_t zero = 0;
  const auto c = read_per_cpu_sum<loupe_unwind_counters>(stats_fd, &zero);
  const std::string p = component + "/unwind_";
  const std::string names[] = {
      p + "depth_bound",       p + "unsupported", p + "signal_frames",    p + "read_failed",
      p + "bad_frame",         p + "ids_full",    p + "python_no_thread", p + "python_read_failed",
      p + "runtime_seen_lost", p + "event_cut"};
  const HealthRow rows[] = {
      {names[0].c_str(), c.depth_bound,
       "user stacks cut at the unwinder's bound (127 frames): their root is missing", c.walks,
       "stacks", LOUPE_HEALTH_EFFECT_DEGRADED},
      {names[1].c_str(), c.unsupported,
       "user stacks stopped at a frame whose CFI rule the in-kernel unwinder does not follow",
       c.walks, "stacks", LOUPE_HEALTH_EFFECT_DEGRADED},
      {names[2].c_str(), c.signal_frames,
       "user stacks stopped at a signal trampoline (not followed yet)", c.walks, "stacks",
       LOUPE_HEALTH_EFFECT_DEGRADED},
      {names[3].c_str(), c.read_failed,
       "user stacks stopped where the stack could not be read (a page not resident)", c.walks,
       "stacks", LOUPE_HEALTH_EFFECT_DEGRADED},
      {names[4].c_str(), c.bad_frame, "user stacks stopped at a frame with an impossible CFA",
       c.walks, "stacks", LOUPE_HEALTH_EFFECT_DEGRADED},
      // The event stays, counted without its user stack.
      {names[5].c_str(), c.ids_full, "user stacks lost: the unwinder's stack store was full",
       c.walks, "stacks", LOUPE_HEALTH_EFFECT_DEGRADED},
      // Python frames the walk met but could not record: the native frames stay, the
      // Python functions of that activation are missing.
      {names[6].c_str(), c.python_no_thread,
       "evaluation-loop activations without a readable thread state: their Python frames "
       "are missing (the interpreter's key not made yet, or its TLS unreadable)",
       0, nullptr, LOUPE_HEALTH_EFFECT_DEGRADED},
      {names[7].c_str(), c.python_read_failed,
       "Python frame chains cut where a frame could not be read (a page not resident)", 0, nullptr,
       LOUPE_HEALTH_EFFECT_DEGRADED},
      {names[8].c_str(), c.runtime_seen_lost,
       "runtime objects (Python code objects, Java methods and compiled methods) not told to "
       "user space (their ring was full): their frames stay unnamed until seen again",
       0, nullptr, LOUPE_HEALTH_EFFECT_DEGRADED},
      {names[9].c_str(), c.event_cut,
       "user stacks cut at the frames an event carries (latency's outliers 32, fileio's slow "
       "events 64; "
       "Python frames make stacks deeper): their root is missing",
       c.walks, "stacks", LOUPE_HEALTH_EFFECT_DEGRADED},
  };
  emit_health_rows(host, "stacks", rows, is_final, ws, we);
  RecordBuilder rb(LOUPE_RECORD_METRIC, "unwind_frames_per_stack");
  rb.final(is_final).window(ws, we);
  rb.metric(LOUPE_METRIC_GAUGE, "count",
            c.walks ? static_cast<double>(c.frames) / static_cast<double>(c.walks) : 0.0);
  rb.emit(host);
  // Walks made (one a stack taken): what a thinned or filtered event did not cost.
  RecordBuilder wk(LOUPE_RECORD_METRIC, "unwind_walks");
  wk.final(is_final).window(ws, we);
  wk.metric(LOUPE_METRIC_COUNTER, "count", static_cast<double>(c.walks));
  wk.emit(host);
  // Frames of processes without an entry yet, unwound by the rows of the file they were in.
  RecordBuilder vf(LOUPE_RECORD_METRIC, "unwind_vma_frames");
  vf.final(is_final).window(ws, we);
  vf.metric(LOUPE_METRIC_COUNTER, "count", static_cast<double>(c.vma_frames));
  vf.emit(host);
  RecordBuilder fp(LOUPE_RECORD_METRIC, "unwind_fp_frames");
  fp.final(is_final).window(ws, we);
  fp.metric(LOUPE_METRIC_COUNTER, "count", static_cast<double>(c.fp_frames));
  fp.emit(host);
  // Stacks with a frame no table covered, walked on by frame pointers from there: whole
  // for code that keeps them, cut for code that does not. Said, with what helps, but not
  // a loss. (A metric too, for scripts that bound the cut stacks by it.)
  const std::string fp_only = p + "fp_only_stacks";
  RecordBuilder np(LOUPE_RECORD_HEALTH, "stacks");
  np.final(is_final).window(ws, we);
  np.health(LOUPE_HEALTH_OK, fp_only.c_str(), c.no_process,
            "user stacks walked by frame pointers from a frame no unwind table covered: the "
            "first milliseconds of the first process to run a file the session had not seen "
            "(in a system-wide run, its first seconds while every file's are built), JIT "
            "code or the vdso; run the program under loupe (-- CMD) or give --pid for its "
            "tables from its start");
  np.emit(host);
  RecordBuilder nm(LOUPE_RECORD_METRIC, "unwind_fp_only_stacks");
  nm.final(is_final).window(ws, we);
  nm.metric(LOUPE_METRIC_COUNTER, "count", static_cast<double>(c.no_process));
  nm.emit(host);
}

}  // namespace loupe::sdk

#endif  // LOUPE_SDK_UNWIND_HPP
