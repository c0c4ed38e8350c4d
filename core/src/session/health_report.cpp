// SPDX-License-Identifier: Apache-2.0
#include "session/health_report.hpp"

#include <fmt/format.h>

#include "loupe/sdk/records.hpp"

namespace loupe {
namespace {

std::uint32_t warn_if(std::uint64_t v) {
  return v ? LOUPE_HEALTH_WARN : LOUPE_HEALTH_OK;
}

}  // namespace

void HealthReport::health(const std::string& name, const std::string& component,
                          std::uint64_t value, std::uint32_t severity, const std::string& message,
                          bool is_final, const Share& share) {
  sdk::RecordBuilder b(LOUPE_RECORD_HEALTH, name);
  b.final(is_final).health(static_cast<loupe_health_severity>(severity), component, value, message);
  b.of(share.whole, share.unit, share.effect);
  publish_(b.build());
}

void HealthReport::rings(const std::vector<RingStats>& stats, std::vector<CoalescedCount> coalesced,
                         bool is_final) {
  std::map<std::string, std::uint64_t> lost_by_plugin;  // every counted loss of its rings
  std::map<std::string, std::uint64_t> produced_by_plugin;
  for (const auto& st : stats) {
    lost_by_plugin[st.plugin] += st.lost_kernel + st.dropped_queue + st.coalesced + st.count_only +
                                 st.malformed + st.decode_errors;
    // Of what the kernel side produced: what it could not reserve, and what it wrote.
    const std::uint64_t produced = st.lost_kernel + st.received;
    produced_by_plugin[st.plugin] += produced;
    const std::string comp = st.plugin + "/" + st.ring;
    const Share lost{produced, "records", LOUPE_HEALTH_EFFECT_LOST};
    auto h = [&](const char* name, std::uint64_t v, std::uint32_t sev, const std::string& msg = {},
                 const Share& share = {}) { health(name, comp, v, sev, msg, is_final, share); };
    h("ring_received", st.received, LOUPE_HEALTH_OK);
    if (st.lost_kernel_known)
      h("ring_lost_kernel", st.lost_kernel, warn_if(st.lost_kernel),
        st.lost_kernel ? "ring full: records lost in the kernel (raise the ring size or sample)"
                       : "",
        lost);
    else if (!replay_)
      h("ring_lost_kernel_unknown", 0, LOUPE_HEALTH_WARN,
        "the plugin does not count reserve failures");
    std::string why;
    if (st.dropped_queue > st.abandoned)
      why = std::to_string(st.dropped_queue - st.abandoned) +
            " dropped with the queue full (decoders and sinks fell behind)";
    if (st.abandoned)
      why += (why.empty() ? "" : "; ") + std::to_string(st.abandoned) +
             " still queued when the drain ended ([session] drain_timeout gives it more time)";
    h("ring_dropped_queue", st.dropped_queue, warn_if(st.dropped_queue), why, lost);
    // Merged into one record by key: counted, their detail gone.
    h("ring_coalesced", st.coalesced, warn_if(st.coalesced), {},
      Share{produced, "records", LOUPE_HEALTH_EFFECT_DEGRADED});
    h("ring_count_only", st.count_only, warn_if(st.count_only),
      st.count_only ? "queue full: the ring was degraded to counting records" : "", lost);
    h("ring_malformed", st.malformed, warn_if(st.malformed), {}, lost);
    h("ring_decode_errors", st.decode_errors, warn_if(st.decode_errors), {}, lost);
    h("ring_decoded", st.decoded, LOUPE_HEALTH_OK);
    h("ring_queued", st.queued, LOUPE_HEALTH_OK);
    h("ring_queue_high_water", st.queue_high_water, LOUPE_HEALTH_OK);
    h("ring_mean_delay_ns", st.mean_delay_ns, LOUPE_HEALTH_OK);
    h("ring_max_delay_ns", st.max_delay_ns, LOUPE_HEALTH_OK);
    h("ring_sampling_divisor", st.divisor, st.divisor > 1 ? LOUPE_HEALTH_WARN : LOUPE_HEALTH_OK,
      st.divisor > 1
          ? fmt::format("the kernel side emits 1 in {} records (sustained loss)", st.divisor)
          : "");
  }
  for (const auto& [plugin, lost] : lost_by_plugin)
    health("plugin_ring_loss", plugin, lost, warn_if(lost),
           lost ? "ring records lost, dropped, merged or malformed: see the ring_* records" : "",
           is_final, Share{produced_by_plugin[plugin], "records", LOUPE_HEALTH_EFFECT_LOST});

  // Records merged under pressure keep their key: one counter per (ring, key), cumulative.
  for (auto& c : coalesced) coalesced_totals_[{c.plugin + "/" + c.ring, c.key}] += c.count;
  for (const auto& [rk, count] : coalesced_totals_) {
    std::string key = rk.second == RingDispatcher::kCoalesceOverflowKey
                          ? "other"
                          : fmt::format("{:#x}", rk.second);
    sdk::RecordBuilder b(LOUPE_RECORD_METRIC, "ring_coalesced_records");
    b.label("ring", rk.first)
        .label("key", key)
        .final(is_final)
        .window(session_start_wall_, 0)  // end 0: the host's, the report's end
        .metric(LOUPE_METRIC_COUNTER, "records", static_cast<double>(count));
    publish_(b.build());
  }
}

void HealthReport::process_tree(const ProcessTree::Counters* tree, const std::string& unavailable) {
  const std::string comp = "process_tree";
  if (!tree) {
    health("process_tree_unavailable", comp, 1, LOUPE_HEALTH_WARN,
           "child processes were not profiled: " + unavailable, true);
    return;
  }
  health("process_tree_seeded", comp, tree->seeded, LOUPE_HEALTH_OK,
         "the target and the descendants it had when the session began", true);
  health("process_tree_joined", comp, tree->joined, LOUPE_HEALTH_OK,
         "processes the tree gained by fork", true);
  health("process_tree_exited", comp, tree->left, LOUPE_HEALTH_OK, "", true);
  health("process_tree_overflow", comp, tree->overflow, warn_if(tree->overflow),
         tree->overflow ? "forks of the tree while its map was full: those processes and their "
                          "descendants were not profiled"
                        : "",
         true);
  health("process_tree_events_lost", comp, tree->events_lost, warn_if(tree->events_lost),
         tree->events_lost ? "fork/exit events user space missed: some symbol caches were not "
                             "refreshed"
                           : "",
         true);
}

void HealthReport::windows(const WindowStore::Counters& c, const std::string& root, bool is_final) {
  health("windows", "session", c.written, LOUPE_HEALTH_OK,
         fmt::format("{} window(s) written under {}: {} kept ({} bytes), {} removed by retain",
                     c.written, root, c.kept, c.kept_bytes, c.pruned),
         is_final);
  health("windows_incomplete", "session", c.incomplete + c.errors,
         c.incomplete + c.errors ? LOUPE_HEALTH_WARN : LOUPE_HEALTH_OK,
         c.errors ? fmt::format("{} window(s) without some sink's files (window.json names "
                                "them), {} error(s): {}",
                                c.incomplete, c.errors, c.last_error)
                  : fmt::format("{} window(s) without some sink's files (window.json names them)",
                                c.incomplete),
         is_final);
}

void HealthReport::symbol_cache(const SymbolizerStats& stats) {
  if (stats.evicted_exited)
    health("symbol_cache_evicted_exited", "symbolizer", stats.evicted_exited, LOUPE_HEALTH_WARN,
           "exited processes dropped from the full symbol cache: their stacks are unresolved "
           "(process_gone); raise session.symbol_processes",
           true);
}

void HealthReport::mapping_records(const SymbolizerStats* stats, const std::string& unavailable) {
  const std::string comp = "symbolizer";
  if (!stats) {
    health("mapping_records_unavailable", comp, 1, LOUPE_HEALTH_WARN,
           "processes that exit before their stacks are symbolized may stay unresolved "
           "(process_gone): " +
               unavailable,
           true);
    return;
  }
  health("mapping_records", comp, stats->mapping_records, LOUPE_HEALTH_OK,
         "mmap/exec/fork records of the target read from the kernel", true);
  health("mapping_records_lost", comp, stats->mapping_records_lost,
         warn_if(stats->mapping_records_lost),
         stats->mapping_records_lost ? "mmap records the kernel dropped (buffer full): stacks of "
                                       "processes that exited early may stay unresolved"
                                     : "",
         true);
  if (stats->mapping_tasks_missed)
    health("mapping_tasks_missed", comp, stats->mapping_tasks_missed, LOUPE_HEALTH_WARN,
           "threads of the target whose mmap records could not be asked for (exited, or "
           "beyond the bound): their children rely on /proc/PID/maps",
           true);
}

void HealthReport::unwind_tables(std::uint64_t processes, std::uint64_t files, std::uint64_t rows,
                                 std::uint64_t row_bytes, std::uint64_t rows_full,
                                 std::uint64_t write_errors, std::uint64_t build_ns,
                                 std::uint64_t pending) {
  const std::string comp = "unwind_tables";
  health(
      "unwind_tables", comp, rows, LOUPE_HEALTH_OK,
      fmt::format("rows ({} KiB) of {} file(s) for {} process(es), built in {:.0f} ms",
                  rows * row_bytes / 1024, files, processes, static_cast<double>(build_ns) / 1e6),
      true);
  // Their samples are in unwind_fp_only_stacks: the first seconds of a busy system-wide
  // run, or a run shorter than a big file's build.
  health("unwind_files_unbuilt", comp, pending, LOUPE_HEALTH_OK,
         pending ? "files still being built when the session ended: their frames were walked "
                   "by frame pointers (counted in unwind_fp_only_stacks)"
                 : "",
         true);
  health("unwind_rows_full", comp, rows_full, warn_if(rows_full),
         rows_full ? "files left without unwind rows: the rows map was full, so their frames "
                     "were walked by frame pointers (raise the plugin's unwind_rows)"
                   : "",
         true);
  health("unwind_entries_refused", comp, write_errors, warn_if(write_errors),
         write_errors ? "process entries or rows the kernel refused (the process map holds "
                        "1024 processes): their stacks were walked by frame pointers"
                      : "",
         true);
}

void HealthReport::process_watch(const ProcessWatch::Counters& c, const std::string& unavailable,
                                 std::uint64_t ended_unread) {
  const std::string comp = "process_watch";
  health("process_maps_read", comp, c.reads, LOUPE_HEALTH_OK,
         fmt::format("/proc/PID/maps files read; {} more asks served by an earlier read, {} "
                     "refused or gone",
                     c.shared, c.unreadable),
         true);
  if (c.following) {
    health("process_changes", comp, c.changes + c.exits, LOUPE_HEALTH_OK,
           fmt::format("the kernel's records of every process: {} change(s) to processes read "
                       "before, {} exit(s); nothing polled",
                       c.changes, c.exits),
           true);
    health("processes_ended_unread", comp, ended_unread, LOUPE_HEALTH_OK,
           ended_unread ? "processes that ended before they settled (50 ms after an exec or a code "
                          "mapping), never read: the files "
                          "they ran came from their records, and their stacks were walked by "
                          "those files' rows"
                        : "",
           true);
    health("process_records_lost", comp, c.records_lost, warn_if(c.records_lost),
           c.records_lost ? "records the kernel dropped (a buffer was full): every process was "
                            "read again"
                          : "",
           true);
  } else if (!unavailable.empty()) {
    health("process_changes", comp, 0, LOUPE_HEALTH_OK,
           "no records of the machine's processes (" + unavailable +
               "): each was read again every few seconds",
           true);
  }
}

void HealthReport::debuginfod(const SymbolizerStats& s) {
  const std::string comp = "symbolizer";
  health("debuginfod_fetched", comp, s.debuginfod_fetched, LOUPE_HEALTH_OK,
         fmt::format("debug files of {} stripped module(s) asked for", s.debuginfod_requested),
         true);
  health("debuginfod_not_found", comp, s.debuginfod_not_found, LOUPE_HEALTH_OK,
         s.debuginfod_not_found ? "no server had them: those modules keep [fn@0x...] names" : "",
         true);
  const std::uint64_t failed = s.debuginfod_timed_out + s.debuginfod_failed;
  health("debuginfod_failed", comp, failed, warn_if(failed),
         failed ? fmt::format("{} lookup(s) timed out, {} failed (server unreachable, queue "
                              "full): those modules keep [fn@0x...] names",
                              s.debuginfod_timed_out, s.debuginfod_failed)
                : "",
         true);
}

void HealthReport::final_failures(const std::vector<ProbeResult>& probes,
                                  const std::vector<ProfilerHealth>& profilers,
                                  const std::vector<SinkHealth>& sinks,
                                  const std::string& stats_error) {
  if (!stats_error.empty())
    health("probe_stats_unavailable", "loupe", 0, LOUPE_HEALTH_WARN, stats_error, true);
  for (const auto& p : probes)
    if (!p.attached)
      health("probe_attach_failed", p.instance + "/" + p.probe, 1, LOUPE_HEALTH_ERROR, p.error,
             true);
  for (const auto& p : profilers)
    if (p.collect_errors)
      health("plugin_collect_errors", p.instance, p.collect_errors, LOUPE_HEALTH_WARN,
             p.disabled ? "collect() failed; the plugin was disabled" : "collect() failed", true);
  for (const auto& p : profilers)
    if (p.rejected_records)
      health("records_rejected", p.instance, p.rejected_records, LOUPE_HEALTH_WARN,
             "malformed records refused by the host", true);
  for (const auto& sk : sinks) {
    const auto& st = sk.stats;
    if (st.dropped_full || st.consume_errors || st.disabled)
      health("sink_loss", sk.instance, st.dropped_full + st.consume_errors, LOUPE_HEALTH_WARN,
             fmt::format("dropped {} (queue full), {} consume errors{}{}", st.dropped_full,
                         st.consume_errors, st.disabled ? "; disabled: " : "",
                         st.disabled ? st.last_error : ""),
             true);
  }
}

void HealthReport::dispatch_event(const DispatchEvent& ev, std::uint64_t wall_ns) {
  sdk::RecordBuilder b(LOUPE_RECORD_EVENT, "ring_backpressure");
  b.event_time(wall_ns)
      .field("ring", ev.plugin + "/" + ev.ring)
      .field("change", ev.what)
      .field_u("old_divisor", ev.old_divisor)
      .field_u("new_divisor", ev.new_divisor)
      .field("loss_ratio", ev.loss_ratio);
  publish_(b.build());
}

}  // namespace loupe
