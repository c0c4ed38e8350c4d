// SPDX-License-Identifier: Apache-2.0
#include "region_table.hpp"

#include <algorithm>

namespace loupe::jitregions {

const char* to_string(RegionSource s) {
  switch (s) {
    case RegionSource::kMmapAnon: return "mmap_anon";
    case RegionSource::kMmapFile: return "mmap_file";
    case RegionSource::kMprotect: return "mprotect";
    case RegionSource::kPreexisting: return "preexisting";
  }
  return "?";
}

ProcessRegions& RegionTable::process(std::uint32_t tgid, const std::string& comm,
                                     std::uint64_t ns) {
  auto it = procs_.find(tgid);
  if (it == procs_.end()) {
    if (procs_.size() >= limits_.max_processes) evict_process();
    it = procs_.emplace(tgid, ProcessRegions{}).first;
    it->second.tgid = tgid;
  }
  if (!comm.empty()) it->second.comm = comm;
  it->second.last_active_ns = std::max(it->second.last_active_ns, ns);
  return it->second;
}

void RegionTable::evict_process() {
  auto victim = procs_.end();
  for (auto it = procs_.begin(); it != procs_.end(); ++it) {
    if (victim == procs_.end() || (it->second.exited && !victim->second.exited) ||
        (it->second.exited == victim->second.exited &&
         it->second.last_active_ns < victim->second.last_active_ns))
      victim = it;
  }
  if (victim != procs_.end()) {
    procs_.erase(victim);
    ++processes_evicted_;
  }
}

void RegionTable::retire(ProcessRegions& p, Region r, std::uint64_t ns) {
  r.removed_ns = ns;
  ++p.removals;
  p.retired.push_back(std::move(r));
  while (p.retired.size() > limits_.max_retired) {
    p.retired.pop_front();
    ++p.retired_dropped;
  }
}

void RegionTable::install(std::uint32_t tgid, std::uint32_t tid, const std::string& comm,
                          std::uint64_t start, std::uint64_t len, std::uint64_t ns,
                          RegionSource source) {
  if (len == 0) return;
  // The kernel rounds lengths up to whole pages.
  len = (len + 4095) & ~std::uint64_t{4095};
  auto& p = process(tgid, comm, ns);
  // What the new code overlaps is gone: a replacement is a removal plus an install.
  remove(tgid, start, len, ns);
  Region r;
  r.start = start;
  r.end = start + len;
  r.generation = ++p.generations[start];
  r.install_ns = ns;
  r.install_tid = tid;
  r.source = source;
  p.live.emplace(start, std::move(r));
  ++p.installs;
  while (p.live.size() > limits_.max_regions) {
    auto oldest = std::min_element(p.live.begin(), p.live.end(), [](const auto& a, const auto& b) {
      return a.second.install_ns < b.second.install_ns;
    });
    p.generations.erase(oldest->first);
    p.live.erase(oldest);
    ++p.regions_evicted;
  }
  while (p.generations.size() > 2 * limits_.max_regions) p.generations.erase(p.generations.begin());
}

void RegionTable::remove(std::uint32_t tgid, std::uint64_t start, std::uint64_t len,
                         std::uint64_t ns) {
  auto pit = procs_.find(tgid);
  if (pit == procs_.end() || len == 0) return;
  auto& p = pit->second;
  len = (len + 4095) & ~std::uint64_t{4095};
  const std::uint64_t end = start + len;
  std::vector<Region> cut;
  for (auto it = p.live.begin(); it != p.live.end();) {
    const Region& r = it->second;
    if (r.end <= start || r.start >= end) {
      ++it;
      continue;
    }
    cut.push_back(r);
    it = p.live.erase(it);
  }
  for (auto& r : cut) {
    // Parts outside the removed range stay live as the same region (same generation).
    if (r.start < start) {
      Region left = r;
      left.end = start;
      p.live.emplace(left.start, left);
    }
    if (r.end > end) {
      Region right = r;
      right.start = end;
      p.live.emplace(right.start, right);
    }
    Region gone = r;
    gone.start = std::max(r.start, start);
    gone.end = std::min(r.end, end);
    retire(p, std::move(gone), ns);
  }
}

void RegionTable::process_exit(std::uint32_t tgid, std::uint64_t ns) {
  auto it = procs_.find(tgid);
  if (it == procs_.end()) return;
  auto& p = it->second;
  // Regions end with the process; they are lifetimes, not removals.
  std::uint64_t removals = p.removals;
  for (auto& [start, r] : p.live) retire(p, r, ns);
  p.removals = removals;
  p.live.clear();
  p.exited = true;
  p.last_active_ns = std::max(p.last_active_ns, ns);
}

void RegionTable::process_exec(std::uint32_t tgid, std::uint64_t ns) {
  process_exit(tgid, ns);
  if (auto it = procs_.find(tgid); it != procs_.end()) it->second.exited = false;
}

void RegionTable::seed(std::uint32_t tgid, const std::string& comm, std::uint64_t start,
                       std::uint64_t len, std::uint64_t ns) {
  install(tgid, 0, comm, start, len, ns, RegionSource::kPreexisting);
  auto& p = procs_.at(tgid);
  --p.installs;
  ++p.preexisting;
}

const Region* RegionTable::sample(std::uint32_t tgid, std::uint32_t tid, const std::string& comm,
                                  std::uint64_t ip, std::uint64_t ns,
                                  std::uint64_t* first_exec_ns) {
  auto& p = process(tgid, comm, ns);
  ++p.samples;
  auto it = p.live.upper_bound(ip);
  if (it == p.live.begin()) return nullptr;
  --it;
  Region& r = it->second;
  if (ip >= r.end) return nullptr;
  ++p.samples_in_regions;
  ++r.samples;
  ++r.exec_tids[tid];
  if (tid == r.install_tid) ++p.samples_by_installer;
  if (r.first_sample_ns == 0 && r.source == RegionSource::kPreexisting) {
    r.first_sample_ns = ns;
  } else if (r.first_sample_ns == 0 && ns >= r.install_ns) {
    r.first_sample_ns = ns;
    if (first_exec_ns) *first_exec_ns = ns - r.install_ns;
    if (p.first_exec_latencies.size() < kMaxLatencies)
      p.first_exec_latencies.push_back(ns - r.install_ns);
  }
  return &r;
}

void RegionTable::expire_exited() {
  for (auto it = procs_.begin(); it != procs_.end();)
    it = it->second.exited ? procs_.erase(it) : std::next(it);
}

void RegionTable::mark_reported() {
  for (auto& [tgid, p] : procs_) {
    for (auto& [s, r] : p.live) r.reported = true;
    p.retired.clear();
  }
}

}  // namespace loupe::jitregions
