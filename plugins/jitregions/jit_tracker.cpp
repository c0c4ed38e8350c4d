// SPDX-License-Identifier: Apache-2.0
#include "jit_tracker.hpp"

#include <cinttypes>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <sstream>
#include <vector>

#include "loupe/sdk/histogram.hpp"
#include "loupe/sdk/records.hpp"

namespace loupe::jitregions {
namespace {

constexpr std::uint32_t kProtExec = 0x4;
constexpr std::uint32_t kMapAnonymous = 0x20;

std::string hex(std::uint64_t v) {
  char buf[32];
  std::snprintf(buf, sizeof(buf), "0x%" PRIx64, v);
  return buf;
}

std::string comm_of(const jr_event& e) {
  return std::string(e.comm, strnlen(e.comm, sizeof(e.comm)));
}

}  // namespace

int JitTracker::decode(const void* data, std::uint32_t len) {
  if (len < sizeof(jr_event)) {
    std::lock_guard lock(mu_);
    ++malformed_;
    return LOUPE_ERR_INVALID_ARG;
  }
  jr_event e;
  std::memcpy(&e, data, sizeof(e));
  on_event(e);
  return LOUPE_OK;
}

void JitTracker::count_symbol(std::uint32_t tgid, std::uint64_t ip, const Region* region) {
  loupe_frame f{};
  host_.symbolize(tgid, LOUPE_FRAME_USER, &ip, 1, &f);
  const bool jit_named = f.symbol && (f.resolution == LOUPE_RESOLVED_PERF_MAP ||
                                      f.resolution == LOUPE_RESOLVED_JITDUMP);
  // Only JIT code is named here: a sample in ordinary code only counts towards the total.
  if (!jit_named && !region) return;
  std::string name = jit_named ? std::string(f.symbol)
                               : "[jit " + hex(region->start) + "-" + hex(region->end) + "]";
  auto& per = symbols_per_process_[tgid];
  auto key = std::make_pair(tgid, name);
  auto it = symbols_.find(key);
  if (it == symbols_.end()) {
    if (per >= kMaxSymbols)
      key.second = "[other jit symbols]";
    else
      ++per;
    it = symbols_.try_emplace(key).first;
    it->second.address = ip;
    it->second.module = f.module ? f.module : "";
    it->second.resolution =
        jit_named ? f.resolution : static_cast<std::uint32_t>(LOUPE_UNRESOLVED_NO_SYMBOL);
  }
  it->second.samples++;
  it->second.in_region = it->second.in_region || region;
}

std::size_t JitTracker::seed_existing(std::uint32_t pid, std::uint64_t now_boot_ns) {
  const std::string proc = "/proc/" + std::to_string(pid);
  std::ifstream maps(proc + "/maps");
  std::string comm;
  std::getline(std::ifstream(proc + "/comm"), comm);
  std::size_t n = 0;
  std::string line;
  std::lock_guard lock(mu_);
  while (std::getline(maps, line)) {
    // start-end perms offset dev inode [path]
    std::istringstream f(line);
    std::string range, perms, offset, dev, inode, path;
    if (!(f >> range >> perms >> offset >> dev >> inode)) continue;
    std::getline(f >> std::ws, path);
    if (perms.size() < 3 || perms[2] != 'x') continue;
    const bool anon = path.empty() || path.starts_with("[anon") || path.starts_with("/memfd:");
    if (!anon) continue;  // files, [vdso], [vsyscall]: not JIT code
    const auto dash = range.find('-');
    if (dash == std::string::npos) continue;
    const std::uint64_t start = std::stoull(range.substr(0, dash), nullptr, 16);
    const std::uint64_t end = std::stoull(range.substr(dash + 1), nullptr, 16);
    table_.seed(pid, comm, start, end - start, now_boot_ns);
    ++n;
  }
  return n;
}

void JitTracker::on_event(const jr_event& e) {
  std::lock_guard lock(mu_);
  const std::string comm = comm_of(e);
  switch (e.kind) {
    case JR_MMAP:
      if (e.prot & kProtExec)
        table_.install(
            e.tgid, e.tid, comm, e.addr, e.length, e.boot_ns,
            (e.flags & kMapAnonymous) ? RegionSource::kMmapAnon : RegionSource::kMmapFile);
      else
        table_.remove(e.tgid, e.addr, e.length, e.boot_ns);  // MAP_FIXED over a region
      break;
    case JR_MPROTECT:
      if (e.prot & kProtExec) {
        // Making a live region executable again (e.g. RX -> RWX -> RX) is new code only
        // when it was not executable: a region that stays covered keeps its identity.
        bool covered = false;
        if (auto pit = table_.processes().find(e.tgid); pit != table_.processes().end()) {
          auto& live = pit->second.live;
          auto it = live.upper_bound(e.addr);
          if (it != live.begin() && std::prev(it)->second.end >= e.addr + e.length &&
              std::prev(it)->second.start <= e.addr)
            covered = true;
        }
        if (!covered)
          table_.install(e.tgid, e.tid, comm, e.addr, e.length, e.boot_ns, RegionSource::kMprotect);
      } else {
        table_.remove(e.tgid, e.addr, e.length, e.boot_ns);
      }
      break;
    case JR_MUNMAP: table_.remove(e.tgid, e.addr, e.length, e.boot_ns); break;
    case JR_EXIT:
      table_.process_exit(e.tgid, e.boot_ns);
      host_.invalidate_symbols(e.tgid);
      break;
    case JR_EXEC:
      table_.process_exec(e.tgid, e.boot_ns);
      host_.invalidate_symbols(e.tgid);
      break;
    case JR_SAMPLE: {
      if (e.in_kernel) ++samples_in_kernel_;
      const Region* r = table_.sample(e.tgid, e.tid, comm, e.addr, e.boot_ns, nullptr);
      count_symbol(e.tgid, e.addr, r);
      break;
    }
    default: ++malformed_;
  }
}

void JitTracker::emit_region(const ProcessRegions& p, const Region& r, bool is_final,
                             std::uint64_t ws, std::uint64_t we) {
  sdk::RecordBuilder rb(LOUPE_RECORD_EVENT, "jit_region");
  rb.label("pid", std::to_string(p.tgid)).label("comm", p.comm).final(is_final).window(ws, we);
  const bool known_install = r.source != RegionSource::kPreexisting;
  rb.event_time(host_.boot_to_wall_ns(r.install_ns));
  rb.field("start", hex(r.start)).field("end", hex(r.end));
  rb.field_u("address", r.start).field_u("size", r.end - r.start);
  rb.field_u("generation", r.generation).field("source", std::string(to_string(r.source)));
  // A pre-existing region's install time and thread are unknown: left out, not made up.
  if (known_install) {
    rb.field_u("time_installed_ns", host_.boot_to_wall_ns(r.install_ns));
    rb.field_u("install_tid", r.install_tid);
  }
  rb.field("state", std::string(r.removed_ns ? "removed" : "live"));
  if (r.removed_ns && known_install) rb.field_u("lifetime_ns", r.removed_ns - r.install_ns);
  rb.field_u("samples", r.samples);
  if (r.first_sample_ns && known_install)
    rb.field_u("first_exec_latency_ns", r.first_sample_ns - r.install_ns);
  std::string tids;
  std::uint64_t by_installer = 0;
  for (const auto& [tid, n] : r.exec_tids) {
    if (!tids.empty()) tids += ",";
    tids += std::to_string(tid) + ":" + std::to_string(n);
    if (tid == r.install_tid) by_installer = n;
  }
  rb.field("exec_tids", tids.empty() ? std::string("-") : tids);
  if (r.samples)
    rb.field("installer_exec_share",
             static_cast<double>(by_installer) / static_cast<double>(r.samples));
  // The JIT symbol most sampled in the region, when the perf map names one.
  const SymbolCount* best = nullptr;
  const std::string* best_name = nullptr;
  for (auto it = symbols_.lower_bound({p.tgid, ""});
       it != symbols_.end() && it->first.first == p.tgid; ++it)
    if (it->second.address >= r.start && it->second.address < r.end &&
        (!best || it->second.samples > best->samples)) {
      best = &it->second;
      best_name = &it->first.second;
    }
  if (best_name) rb.field("top_symbol", *best_name);
  rb.emit(host_);
}

void JitTracker::emit_process(const ProcessRegions& p, bool is_final, std::uint64_t ws,
                              std::uint64_t we) {
  auto metric = [&](const char* name, loupe_metric_type type, const char* unit, double v) {
    sdk::RecordBuilder rb(LOUPE_RECORD_METRIC, name);
    rb.label("pid", std::to_string(p.tgid)).label("comm", p.comm).final(is_final).window(ws, we);
    rb.metric(type, unit, v).emit(host_);
  };
  metric("jit_installs", LOUPE_METRIC_COUNTER, "count", static_cast<double>(p.installs));
  metric("jit_preexisting_regions", LOUPE_METRIC_GAUGE, "count",
         static_cast<double>(p.preexisting));
  metric("jit_removals", LOUPE_METRIC_COUNTER, "count", static_cast<double>(p.removals));
  metric("jit_live_regions", LOUPE_METRIC_GAUGE, "count", static_cast<double>(p.live.size()));
  if (we > ws)
    metric("jit_churn_per_s", LOUPE_METRIC_GAUGE, "1/s",
           static_cast<double>(p.installs + p.removals) / (static_cast<double>(we - ws) / 1e9));
  metric("jit_samples_total", LOUPE_METRIC_COUNTER, "count", static_cast<double>(p.samples));
  metric("jit_samples_in_regions", LOUPE_METRIC_COUNTER, "count",
         static_cast<double>(p.samples_in_regions));
  if (p.samples) {
    metric("jit_region_share", LOUPE_METRIC_GAUGE, "ratio",
           static_cast<double>(p.samples_in_regions) / static_cast<double>(p.samples));
  }
  if (p.samples_in_regions)
    metric("jit_installer_exec_share", LOUPE_METRIC_GAUGE, "ratio",
           static_cast<double>(p.samples_by_installer) / static_cast<double>(p.samples_in_regions));
  std::uint64_t jit_named = 0;
  for (auto it = symbols_.lower_bound({p.tgid, ""});
       it != symbols_.end() && it->first.first == p.tgid; ++it) {
    const auto& s = it->second;
    if (s.resolution == LOUPE_RESOLVED_PERF_MAP || s.resolution == LOUPE_RESOLVED_JITDUMP)
      jit_named += s.samples;
    // One-frame stacks: the folded and console sinks rank JIT symbols by samples.
    loupe_frame f{};
    f.address = s.address;
    f.symbol = it->first.second.c_str();
    f.module = s.module.empty() ? nullptr : s.module.c_str();
    f.kind = LOUPE_FRAME_JIT;
    f.resolution = s.resolution;
    sdk::RecordBuilder rb(LOUPE_RECORD_STACK_SAMPLE, "jit_samples");
    rb.label("pid", std::to_string(p.tgid)).label("comm", p.comm).final(is_final).window(ws, we);
    rb.frames(&f, 1).value("samples", "count", static_cast<std::int64_t>(s.samples)).emit(host_);
  }
  if (p.samples)
    metric("jit_symbol_share", LOUPE_METRIC_GAUGE, "ratio",
           static_cast<double>(jit_named) / static_cast<double>(p.samples));
  if (!p.first_exec_latencies.empty()) {
    loupe_hist h{};
    for (auto v : p.first_exec_latencies) sdk::hist_add(h, v);
    sdk::RecordBuilder rb(LOUPE_RECORD_HISTOGRAM, "jit_first_exec_latency");
    rb.label("pid", std::to_string(p.tgid)).label("comm", p.comm).final(is_final).window(ws, we);
    sdk::add_histogram(rb, "ns", h).emit(host_);
  }
  for (const auto& [start, r] : p.live)
    if (is_final || !r.reported) emit_region(p, r, is_final, ws, we);
  for (const auto& r : p.retired) emit_region(p, r, is_final, ws, we);
  if (p.regions_evicted || p.retired_dropped) {
    sdk::RecordBuilder rb(LOUPE_RECORD_HEALTH, "regions");
    rb.label("pid", std::to_string(p.tgid)).final(is_final).window(ws, we);
    rb.health(LOUPE_HEALTH_WARN, "jitregions/table", p.regions_evicted + p.retired_dropped,
              "regions evicted or removed regions not reported: raise max_regions / max_retired");
    rb.emit(host_);
  }
}

void JitTracker::report(bool is_final, std::uint64_t ws, std::uint64_t we) {
  std::lock_guard lock(mu_);
  for (const auto& [tgid, p] : table_.processes()) emit_process(p, is_final, ws, we);
  sdk::RecordBuilder rb(LOUPE_RECORD_HEALTH, "decode");
  rb.final(is_final).window(ws, we);
  rb.health(malformed_ ? LOUPE_HEALTH_WARN : LOUPE_HEALTH_OK, "jitregions/malformed", malformed_);
  rb.emit(host_);
  sdk::RecordBuilder pe(LOUPE_RECORD_HEALTH, "processes");
  pe.final(is_final).window(ws, we);
  pe.health(table_.processes_evicted() ? LOUPE_HEALTH_WARN : LOUPE_HEALTH_OK,
            "jitregions/processes_evicted", table_.processes_evicted(),
            "processes dropped from the region table (max_processes)");
  pe.emit(host_);
  // Exited processes were reported: their symbols and regions go, bounding memory.
  for (const auto& [tgid, p] : table_.processes()) {
    if (!p.exited) continue;
    symbols_.erase(symbols_.lower_bound({tgid, ""}), symbols_.lower_bound({tgid + 1, ""}));
    symbols_per_process_.erase(tgid);
  }
  table_.mark_reported();
  table_.expire_exited();
}

}  // namespace loupe::jitregions
