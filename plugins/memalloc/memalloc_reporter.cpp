// SPDX-License-Identifier: Apache-2.0
#include "memalloc_reporter.hpp"

#include <bpf/bpf.h>
#include <bpf/libbpf.h>

#include <algorithm>
#include <cstdio>

#include "allocator_attacher.hpp"
#include "loupe/hist.h"
#include "loupe/sdk/histogram.hpp"
#include "loupe/sdk/percpu.hpp"
#include "loupe/sdk/records.hpp"
#include "loupe/sdk/units.hpp"

namespace loupe::memalloc {
namespace {

const char* origin_name(std::uint32_t origin) {
  switch (origin) {
    case MA_ORIGIN_USER: return "user";
    case MA_ORIGIN_KMALLOC: return "kmalloc";
    case MA_ORIGIN_PAGE: return "page";
  }
  return "unknown";
}

}  // namespace

MemallocReporter::MemallocReporter(const sdk::Host& host, ReporterMaps maps, ReporterOptions opts,
                                   SampleScaling scaling, StackFrames& frames,
                                   std::vector<std::pair<std::string, std::string>> skipped)
    : host_(host),
      maps_(maps),
      opts_(opts),
      scaling_(scaling),
      frames_(frames),
      skipped_(std::move(skipped)) {}

SiteTable MemallocReporter::read_sites(std::uint64_t now) const {
  SiteTable t;
  sdk::for_each_entry<ma_stack_key, ma_stack_stats>(
      maps_.sites_fd, [&](const ma_stack_key& k, const ma_stack_stats& v) { t.add_site(k, v); });
  if (dwarf_)
    for (const auto& [k, v] : dwarf_->sites()) t.add_site(k, v);
  sdk::for_each_entry<ma_alloc_key, ma_alloc_info>(
      maps_.outstanding_fd, [&](const ma_alloc_key&, const ma_alloc_info& v) {
        if (v.stack.kernel_stack_id != MA_DWARF_SEQ) {
          t.add_outstanding(v, now, opts_.min_age_ns, opts_.leak_age_ns);
          return;
        }
        // A dwarf-mode allocation names itself: its site is in user space.
        ma_alloc_info with_site = v;
        if (dwarf_ &&
            dwarf_->site_of(static_cast<std::uint32_t>(v.stack.user_stack_id), &with_site.stack))
          t.add_outstanding(with_site, now, opts_.min_age_ns, opts_.leak_age_ns);
      });
  return t;
}

ma_counters MemallocReporter::read_counters() const {
  std::uint32_t zero = 0;
  return sdk::read_per_cpu_sum<ma_counters>(maps_.counters_fd, &zero);
}

void MemallocReporter::emit_metric(const std::string& name, const char* unit, double v,
                                   bool is_final, const std::string& func) {
  sdk::RecordBuilder rb(LOUPE_RECORD_METRIC, name);
  rb.final(is_final).window(win_start_, win_end_);
  if (!func.empty()) rb.label("function", func);
  rb.metric(LOUPE_METRIC_COUNTER, unit, v).emit(host_);
}

void MemallocReporter::emit_health(const std::string& name, std::uint64_t v,
                                   const std::string& message, bool is_final,
                                   loupe_health_severity bad) {
  sdk::RecordBuilder rb(LOUPE_RECORD_HEALTH, name);
  rb.final(is_final).window(win_start_, win_end_);
  rb.health(v ? bad : LOUPE_HEALTH_OK, "memalloc", v, v ? message : std::string()).emit(host_);
}

void MemallocReporter::emit_sites(const std::vector<SiteRow>& rows, bool is_final,
                                  std::uint64_t now_ns) {
  const std::string sampling = scaling_.describe();
  for (const auto& r : rows) {
    const Said now{r.allocs, r.frees, r.outstanding};
    auto& said = said_[{r.key.tgid, r.key.user_stack_id, r.key.kernel_stack_id, r.key.origin}];
    if (!is_final && said == now) continue;
    said = now;
    const auto& frames = frames_.frames(r.key);
    Estimate alloc = scaling_.scale(r.allocs, r.bytes);
    Estimate freed = scaling_.scale(r.frees, r.freed_bytes);
    Estimate live = scaling_.scale(r.outstanding, r.outstanding_bytes);
    auto base = [&](sdk::RecordBuilder& rb) {
      rb.final(is_final).window(win_start_, win_end_);
      rb.label("pid", std::to_string(r.key.tgid)).label("origin", origin_name(r.key.origin));
      rb.label("sampling", sampling);
      rb.frames(frames.data(), static_cast<std::uint32_t>(frames.size()));
    };
    sdk::RecordBuilder site(LOUPE_RECORD_STACK_SAMPLE, "alloc_sites");
    base(site);
    site.value("alloc_bytes", "bytes", static_cast<std::int64_t>(alloc.bytes))
        .value("allocs", "count", static_cast<std::int64_t>(alloc.count))
        .value("outstanding_bytes", "bytes", static_cast<std::int64_t>(live.bytes))
        .value("outstanding_allocs", "count", static_cast<std::int64_t>(live.count))
        .value("frees", "count", static_cast<std::int64_t>(freed.count))
        .value("freed_bytes", "bytes", static_cast<std::int64_t>(freed.bytes))
        .emit(host_);
    if (r.outstanding == 0) continue;
    sdk::RecordBuilder leak(LOUPE_RECORD_STACK_SAMPLE, "leaks");
    base(leak);
    std::uint64_t age = now_ns > r.oldest_ns ? now_ns - r.oldest_ns : 0;
    leak.value("outstanding_bytes", "bytes", static_cast<std::int64_t>(live.bytes))
        .value("outstanding_allocs", "count", static_cast<std::int64_t>(live.count))
        .value("oldest_age_ns", "ns", static_cast<std::int64_t>(age))
        .emit(host_);
  }
}

namespace {

// The function a reader knows the site by: the first frame, leaf first, outside the
// allocator's library (libc's malloc is every site's leaf).
std::string site_name(const std::vector<loupe_frame>& frames) {
  if (frames.empty()) return "a site without frames";
  const char* lib = frames[0].module;
  const bool in_library = lib && std::string(lib).find(".so") != std::string::npos;
  for (const auto& f : frames)
    if (f.symbol && (!in_library || !f.module || std::string(f.module) != lib)) return f.symbol;
  return frames[0].symbol ? frames[0].symbol : "an unnamed site";
}

}  // namespace

// Rule old_allocations (README): among the 3 sites holding the most bytes in live
// allocations at least leak_age_ms old at the end, one that holds at least 5 % of all
// live bytes is a leak suspect: said with its bytes, allocations, age and share.
void MemallocReporter::emit_findings(const std::vector<SiteRow>& all, std::uint64_t now_ns) {
  constexpr std::size_t kTopSites = 3;
  constexpr double kMinShare = 0.05;
  double live_bytes = 0;
  std::vector<const SiteRow*> old;
  for (const auto& r : all) {
    live_bytes += static_cast<double>(scaling_.scale(r.outstanding, r.outstanding_bytes).bytes);
    if (r.old) old.push_back(&r);
  }
  std::stable_sort(old.begin(), old.end(),
                   [](const SiteRow* a, const SiteRow* b) { return a->old_bytes > b->old_bytes; });
  if (old.size() > kTopSites) old.resize(kTopSites);
  const std::string sampling = scaling_.describe();
  for (const SiteRow* r : old) {
    const Estimate held = scaling_.scale(r->old, r->old_bytes);
    const double share = live_bytes > 0 ? static_cast<double>(held.bytes) / live_bytes : 0;
    if (share < kMinShare) continue;
    const std::uint64_t oldest = now_ns > r->oldest_ns ? now_ns - r->oldest_ns : 0;
    const std::string site = site_name(frames_.frames(r->key));
    char buf[512];
    std::snprintf(buf, sizeof(buf),
                  "%s (pid %u) holds %s in %llu allocations older than %s, %.0f %% of the live "
                  "bytes at the end (the oldest %s)%s",
                  site.c_str(), r->key.tgid,
                  sdk::human_amount(static_cast<double>(held.bytes), "bytes").c_str(),
                  static_cast<unsigned long long>(held.count),
                  sdk::human_amount(static_cast<double>(opts_.leak_age_ns), "ns").c_str(),
                  100 * share, sdk::human_amount(static_cast<double>(oldest), "ns").c_str(),
                  scaling_.exact() ? "" : ("; estimated, sampling " + sampling).c_str());
    sdk::RecordBuilder f(LOUPE_RECORD_FINDING, "old_allocations");
    f.label("site", site).label("pid", std::to_string(r->key.tgid));
    f.final(true).window(win_start_, win_end_).finding("old_allocations", buf, share);
    f.field("site", site).field_u("pid", r->key.tgid).field_u("bytes", held.bytes);
    f.field_u("allocs", held.count).field_u("min_age_ns", opts_.leak_age_ns);
    f.field_u("oldest_age_ns", oldest).field("share", share);
    f.field_u("live_bytes", static_cast<std::uint64_t>(live_bytes));
    f.emit(host_);
  }
}

void MemallocReporter::emit_histogram(bool is_final) {
  std::uint32_t zero = 0;
  auto per_cpu = sdk::read_per_cpu<loupe_hist>(maps_.sizes_fd, &zero);
  if (per_cpu.empty()) return;
  loupe_hist total = sdk::hist_merge_per_cpu<loupe_hist>(per_cpu);
  sdk::RecordBuilder rb(LOUPE_RECORD_HISTOGRAM, "alloc_size");
  rb.final(is_final).window(win_start_, win_end_).label("sampling", scaling_.describe());
  sdk::add_histogram(rb, "bytes", total).emit(host_);
}

void MemallocReporter::collect(bool is_final, std::uint64_t window_start_ns,
                               std::uint64_t window_end_ns) {
  win_start_ = window_start_ns;
  win_end_ = window_end_ns;
  // Ages are as of the window's end (for the final report: when the session ended, e.g.
  // when its command exited), not as of this call, which may come seconds later.
  std::uint64_t now = host_.now_ns(LOUPE_CLOCK_MONOTONIC);
  const std::uint64_t wall = host_.now_ns(LOUPE_CLOCK_REALTIME);
  if (window_end_ns && wall > window_end_ns && wall - window_end_ns < now)
    now -= wall - window_end_ns;
  SiteTable table = read_sites(now);
  auto all = table.rows();
  auto shown = SiteTable::top(all, opts_.top);
  emit_sites(shown, is_final, now);
  emit_histogram(is_final);
  if (is_final) emit_findings(all, now);
  frames_.forget_frames();

  Estimate allocs, frees, live;
  for (const auto& r : all) {
    Estimate a = scaling_.scale(r.allocs, r.bytes), f = scaling_.scale(r.frees, r.freed_bytes),
             l = scaling_.scale(r.outstanding, r.outstanding_bytes);
    allocs.count += a.count;
    allocs.bytes += a.bytes;
    frees.count += f.count;
    frees.bytes += f.bytes;
    live.count += l.count;
    live.bytes += l.bytes;
  }
  emit_metric("allocs", "count", static_cast<double>(allocs.count), is_final);
  emit_metric("alloc_bytes", "bytes", static_cast<double>(allocs.bytes), is_final);
  emit_metric("frees", "count", static_cast<double>(frees.count), is_final);
  emit_metric("freed_bytes", "bytes", static_cast<double>(frees.bytes), is_final);
  emit_metric("outstanding_allocs", "count", static_cast<double>(live.count), is_final);
  emit_metric("outstanding_bytes", "bytes", static_cast<double>(live.bytes), is_final);
  emit_metric("sites", "count", static_cast<double>(all.size()), is_final);
  emit_metric("sites_reported", "count", static_cast<double>(shown.size()), is_final);

  ma_counters c = read_counters();
  const auto& names = allocator_functions();
  for (std::size_t i = 0; i < MA_NR_FUNCS; ++i)
    if (c.calls[i])
      emit_metric("calls", "count", static_cast<double>(c.calls[i]), is_final, names[i]);
  emit_metric("calls", "count", static_cast<double>(c.frees), is_final, "free");
  emit_metric("realloc_frees", "count", static_cast<double>(c.realloc_frees), is_final);
  emit_metric("frees_untracked", "count", static_cast<double>(c.frees_untracked), is_final);
  emit_metric("sampled_out", "count", static_cast<double>(c.sampled_out), is_final);
  emit_metric("failed", "count", static_cast<double>(c.failed), is_final);
  emit_metric("nested", "count", static_cast<double>(c.nested), is_final);
  emit_metric("kernel_allocs", "count", static_cast<double>(c.kernel_allocs), is_final);
  emit_metric("kernel_frees", "count", static_cast<double>(c.kernel_frees), is_final);

  emit_health("stack_failures_user", c.user_stack_failed,
              "user stacks could not be taken; those allocations have no user frames", is_final);
  emit_health("stack_failures_kernel", c.kernel_stack_failed, "kernel stacks could not be taken",
              is_final);
  emit_health("stack_collisions", c.stack_collisions,
              "the stack map had no room for a new stack (raise max_stacks)", is_final);
  emit_health("sites_full", c.stats_full,
              "allocations at sites beyond max_sites = " + std::to_string(opts_.max_sites) +
                  " were not counted per site (raise max_sites)",
              is_final);
  emit_health("outstanding_full", c.outstanding_full,
              "live allocations beyond max_outstanding = " + std::to_string(opts_.max_outstanding) +
                  " were not tracked: the leak report is short (raise max_outstanding)",
              is_final);
  emit_health("pending_full", c.pending_full,
              "allocator calls in flight could not be tracked: too many threads (raise "
              "max_threads)",
              is_final);
  emit_health("processes_full", c.processes_full,
              "allocations of processes beyond max_processes: their mappings were not read while "
              "they ran, so their stacks may not resolve if they exit first (raise "
              "max_processes)",
              is_final);
  emit_health("unmatched", c.unmatched_returns,
              "allocator returns without their entry (probes attached mid-call)", is_final,
              LOUPE_HEALTH_OK);
  for (const auto& [func, why] : skipped_)
    emit_health("probe_skipped", 1, func + ": " + why, is_final);
  if (is_final) {
    std::uint64_t user_calls = 0;
    for (auto n : c.calls) user_calls += n;
    if (user_calls + c.frees + c.kernel_allocs + c.kernel_frees == 0)
      emit_health("silent_probe", 1,
                  "no allocation or free was seen (the traced process allocated nothing, uses "
                  "another allocator, or was filtered out)",
                  is_final, LOUPE_HEALTH_OK);
  }
}

}  // namespace loupe::memalloc
