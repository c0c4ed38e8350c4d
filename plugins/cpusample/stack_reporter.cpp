// SPDX-License-Identifier: Apache-2.0
#include "stack_reporter.hpp"

#include <bpf/bpf.h>
#include <bpf/libbpf.h>

#include <algorithm>
#include <cstring>

#include "loupe/sdk/percpu.hpp"
#include "loupe/sdk/records.hpp"
#include "loupe/sdk/unwind.hpp"

namespace loupe::cpusample {
namespace {

std::string key_bytes(const cs_key& k) {
  return std::string(reinterpret_cast<const char*>(&k), sizeof(k));
}

}  // namespace

StackReporter::StackReporter(const sdk::Host& host, ReporterMaps maps, ReporterOptions opts)
    : host_(host),
      maps_(maps),
      opts_(std::move(opts)),
      frames_(host, maps.stacks_fd, CS_MAX_STACK_DEPTH),
      user_frames_(host, maps.user_stacks_fd >= 0 ? maps.user_stacks_fd : maps.stacks_fd,
                   CS_MAX_STACK_DEPTH) {}

std::vector<std::pair<cs_key, std::uint64_t>> StackReporter::read_counts() const {
  return sdk::map_entries<cs_key, std::uint64_t>(maps_.counts_fd);
}

void StackReporter::warm() {
  // Read under the lock: an eviction between the read and the lookups would leave frames
  // cached under ids freed for other stacks.
  std::lock_guard lock(mu_);
  auto counts = read_counts();
  for (const auto& [k, v] : counts) {
    user_frames_.user(k.tgid, k.user_stack_id);
    frames_.kernel(k.kernel_stack_id);
  }
}

cs_counters StackReporter::read_counters() const {
  std::uint32_t zero = 0;
  return sdk::read_per_cpu_sum<cs_counters>(maps_.counters_fd, &zero);
}

void StackReporter::add_dwarf_sample(const cs_dwarf_rec& rec,
                                     const std::vector<std::uint64_t>& user) {
  std::lock_guard lock(mu_);
  const std::uint64_t weight = rec.weight ? rec.weight : 1;
  DwarfKey key{};
  key.tgid = rec.tgid;
  key.pid = opts_.per_thread ? rec.pid : 0;
  key.kernel_stack_id = rec.kernel_stack_id;
  key.user_stack = kNoStack;
  std::memcpy(key.comm.data(), rec.comm, CS_COMM_LEN);
  if (!user.empty()) {
    auto it = dwarf_index_.find({rec.tgid, user});
    if (it == dwarf_index_.end()) {
      if (dwarf_frames_.size() >= opts_.max_stacks) {
        dwarf_stacks_full_ += weight;
        return;
      }
      // Symbolized now, while the process surely runs.
      Frames frames(user.size());
      host_.symbolize(rec.tgid, LOUPE_FRAME_USER, user.data(),
                      static_cast<std::uint32_t>(user.size()), frames.data());
      const std::uint32_t id = next_dwarf_stack_++;
      dwarf_frames_.emplace(id, std::move(frames));
      if (user.size() >= CS_MAX_STACK_DEPTH) dwarf_depth_.insert(id);
      it = dwarf_index_.emplace(std::make_pair(rec.tgid, user), id).first;
    }
    key.user_stack = it->second;
  }
  auto [slot, inserted] = dwarf_counts_.try_emplace(key, 0);
  if (inserted && dwarf_counts_.size() > opts_.max_keys) {
    dwarf_counts_.erase(slot);
    dwarf_keys_full_ += weight;
    return;
  }
  slot->second += weight;
}

void StackReporter::handed_over(const cs_key& key, std::uint64_t total) {
  std::lock_guard lock(mu_);
  handed_[key_bytes(key)] = {key, total};
}

void StackReporter::emit_stack(std::uint32_t tgid, std::uint32_t tid, const char* comm,
                               std::size_t comm_len, const std::string& kb, std::uint64_t total,
                               const Frames* kernel, const Frames* user, bool cut, bool is_final,
                               std::uint64_t ws, std::uint64_t we, std::uint64_t* truncated) {
  std::uint64_t value = total;
  if (!is_final) {
    // Interval reports are deltas; the final report is the whole session.
    std::uint64_t& prev = previous_.at(kb);
    value = total - std::min(prev, total);
    prev = total;
  }
  Frames frames;
  if (cut) *truncated += total;
  if (kernel) frames.insert(frames.end(), kernel->begin(), kernel->end());
  if (user) frames.insert(frames.end(), user->begin(), user->end());
  if (value == 0) return;
  sdk::RecordBuilder rb(LOUPE_RECORD_STACK_SAMPLE, opts_.record_name);
  rb.label("pid", std::to_string(tgid)).label("comm", std::string(comm, strnlen(comm, comm_len)));
  if (opts_.per_thread) rb.label("tid", std::to_string(tid));
  rb.final(is_final).window(ws, we);
  rb.frames(frames.data(), static_cast<std::uint32_t>(frames.size()));
  rb.value("samples", "count", static_cast<std::int64_t>(value));
  // The estimated CPU time, in the unit offcpu's time_ns has: one wall-clock flame graph
  // (the folded sink with value = "time_ns") holds both.
  if (opts_.sample_ns)
    rb.value("time_ns", "ns", static_cast<std::int64_t>(value * opts_.sample_ns));
  rb.emit(host_);
}

void StackReporter::collect(bool is_final, std::uint64_t ws, std::uint64_t we) {
  std::lock_guard lock(mu_);
  // Settled before the read: the read then holds all these processes ever counted.
  const bool evicting = opts_.evict && opts_.evict_now && !is_final;
  const std::set<std::uint32_t> gone =
      evicting ? sdk::exited(tgids_read_) : std::set<std::uint32_t>{};
  // Handed over before the map is read: a key handed over after the read is not in it.
  std::vector<std::pair<cs_key, std::uint64_t>> handed;
  handed.reserve(handed_.size());
  for (const auto& [kb, entry] : handed_) handed.push_back(entry);
  auto counts = read_counts();
  if (is_final) user_frames_.rename_unnamed_now();
  if (!session_start_) session_start_ = ws;
  std::uint64_t truncated = 0;
  // One row a key: a key made again after its process's handover (a thread sampled on its
  // way out) adds to the handed-over total, not replaces it.
  std::map<std::string, std::pair<cs_key, std::uint64_t>> rows;
  for (const auto* keys : {&counts, &handed})
    for (const auto& [k, total] : *keys) {
      auto& row = rows.try_emplace(key_bytes(k), k, 0).first->second;
      row.second += total;
    }
  for (const auto& [kb, row] : rows) {
    const auto& [k, total] = row;
    const Frames* kf = k.kernel_stack_id >= 0 ? &frames_.kernel(k.kernel_stack_id) : nullptr;
    const Frames* uf = k.user_stack_id >= 0 ? &user_frames_.user(k.tgid, k.user_stack_id) : nullptr;
    const bool cut =
        frames_.kernel_cut(k.kernel_stack_id) || user_frames_.user_cut(k.tgid, k.user_stack_id);
    emit_stack(k.tgid, k.pid, k.comm, sizeof(k.comm), kb, total, kf, uf, cut, is_final, ws, we,
               &truncated);
  }
  for (const auto& [k, total] : dwarf_counts_) {
    const Frames* kf = k.kernel_stack_id >= 0 ? &frames_.kernel(k.kernel_stack_id) : nullptr;
    const Frames* uf = k.user_stack != kNoStack ? &dwarf_frames_.at(k.user_stack) : nullptr;
    std::string kb = "dwarf:";
    kb.append(reinterpret_cast<const char*>(&k), sizeof(k));
    // The user-space unwinder stops at CS_MAX_STACK_DEPTH addresses (inlined frames may
    // add names beyond it).
    const bool cut = frames_.kernel_cut(k.kernel_stack_id) ||
                     (uf && k.user_stack != kNoStack && dwarf_depth_.count(k.user_stack));
    emit_stack(k.tgid, k.pid, k.comm.data(), k.comm.size(), kb, total, kf, uf, cut, is_final, ws,
               we, &truncated);
  }
  if (evicting) evict(counts, handed, gone);
  emit_health(read_counters(), truncated, is_final, ws, we);
  if (maps_.unwind_stats_fd >= 0)
    sdk::emit_unwind_health(host_, "cpusample", maps_.unwind_stats_fd, is_final, ws, we);
  if (dwarf_health_) {
    auto row = [&](const char* component, std::uint64_t v, const char* message) {
      sdk::RecordBuilder rb(LOUPE_RECORD_HEALTH, "stacks");
      rb.final(is_final).window(ws, we);
      rb.health(v ? LOUPE_HEALTH_WARN : LOUPE_HEALTH_OK, component, v, message);
      rb.emit(host_);
    };
    row("cpusample/dwarf_keys_full", dwarf_keys_full_,
        "samples lost: too many distinct (process, stacks) counts (raise max_keys)");
    row("cpusample/dwarf_stacks_full", dwarf_stacks_full_,
        "samples lost: too many distinct user stacks (raise max_stacks)");
    dwarf_health_(is_final, ws, we);
  }
  if (opts_.evict) evicted_.emit(host_, "stacks", "cpusample", is_final, ws, we);
}

// Exited processes' keys (counted in full by the read just reported), the stack ids only
// they used, and what the caches hold for them.
void StackReporter::evict(const std::vector<std::pair<cs_key, std::uint64_t>>& counts,
                          const std::vector<std::pair<cs_key, std::uint64_t>>& handed,
                          const std::set<std::uint32_t>& gone) {
  sdk::StackSweep sweep;
  // Handed over at their exit and now reported: their stacks may go.
  std::set<std::uint32_t> handed_tgids;
  for (const auto& [k, total] : handed) {
    const std::string kb = key_bytes(k);
    handed_.erase(kb);
    previous_.erase(kb);
    handed_tgids.insert(k.tgid);
    sweep.evicted(maps_.stacks_fd, k.kernel_stack_id);
    sweep.evicted(user_store_fd(), k.user_stack_id);
  }
  // Only keys the report read are deleted; the ids to keep come from a read after the
  // deletes, which holds every key counted since.
  for (const auto& [k, total] : counts) {
    if (!gone.count(k.tgid)) continue;
    // Not there any more: handed over since the read. Its record brings the whole total,
    // and the previous total stays until then to say what of it was counted already.
    if (bpf_map_delete_elem(maps_.counts_fd, &k) != 0) continue;
    ++evicted_.keys;
    previous_.erase(key_bytes(k));
    sweep.evicted(maps_.stacks_fd, k.kernel_stack_id);
    sweep.evicted(user_store_fd(), k.user_stack_id);
  }
  sweep.orphans(maps_.stacks_fd, &unreferenced_[maps_.stacks_fd]);
  if (user_store_fd() != maps_.stacks_fd)
    sweep.orphans(user_store_fd(), &unreferenced_[user_store_fd()]);
  std::set<std::uint32_t> read;
  for (const auto& [k, total] : read_counts()) {
    read.insert(k.tgid);
    sweep.kept(maps_.stacks_fd, k.kernel_stack_id);
    sweep.kept(user_store_fd(), k.user_stack_id);
  }
  // Handed over since the report's read: reported at the next one.
  for (const auto& [kb, entry] : handed_) {
    sweep.kept(maps_.stacks_fd, entry.first.kernel_stack_id);
    sweep.kept(user_store_fd(), entry.first.user_stack_id);
  }
  for (auto it = dwarf_counts_.begin(); it != dwarf_counts_.end();) {
    if (!gone.count(it->first.tgid)) {
      read.insert(it->first.tgid);
      sweep.kept(maps_.stacks_fd, it->first.kernel_stack_id);
      ++it;
      continue;
    }
    sweep.evicted(maps_.stacks_fd, it->first.kernel_stack_id);
    ++evicted_.keys;
    std::string kb = "dwarf:";
    kb.append(reinterpret_cast<const char*>(&it->first), sizeof(it->first));
    previous_.erase(kb);
    it = dwarf_counts_.erase(it);
  }
  for (auto it = dwarf_index_.begin(); it != dwarf_index_.end();) {
    if (!gone.count(it->first.first)) {
      ++it;
      continue;
    }
    dwarf_frames_.erase(it->second);
    dwarf_depth_.erase(it->second);
    it = dwarf_index_.erase(it);
  }
  auto freed = sweep.erase();
  for (const auto& [fd, ids] : freed) evicted_.stacks += ids.size();
  for (std::uint32_t tgid : gone) {
    frames_.forget_process(tgid);
    user_frames_.forget_process(tgid);
    // A list a key made after its process's exit handover (or one never handed over).
    if (maps_.handover_lists_fd >= 0) bpf_map_delete_elem(maps_.handover_lists_fd, &tgid);
  }
  for (std::uint32_t tgid : handed_tgids) {
    if (gone.count(tgid) || read.count(tgid)) continue;
    frames_.forget_process(tgid);
    user_frames_.forget_process(tgid);
  }
  const std::set<std::int32_t>& kernel_freed = freed[maps_.stacks_fd];
  const std::set<std::int32_t>& user_freed = freed[user_store_fd()];
  frames_.forget_ids(kernel_freed);
  user_frames_.forget_ids(user_freed);
  evicted_.processes += gone.size();
  // A sample that took a freed id between the read above and the delete: counted, since
  // its id may now name another stack.
  if (!kernel_freed.empty() || !user_freed.empty())
    for (const auto& [k, total] : read_counts())
      if (kernel_freed.count(k.kernel_stack_id) || user_freed.count(k.user_stack_id))
        evicted_.in_use += total;
  tgids_read_ = std::move(read);
}

void StackReporter::emit_health(const cs_counters& c, std::uint64_t truncated, bool is_final,
                                std::uint64_t ws, std::uint64_t we) {
  // The counters are the map's totals since the session began (the stacks are deltas).
  auto metric = [&](const char* name, double v, loupe_metric_type type = LOUPE_METRIC_COUNTER) {
    sdk::RecordBuilder rb(LOUPE_RECORD_METRIC, name);
    rb.final(is_final).window(session_start_, we).metric(type, "count", v).emit(host_);
  };
  metric("samples", static_cast<double>(c.samples));
  metric("samples_idle", static_cast<double>(c.idle));
  metric("samples_filtered_out", static_cast<double>(c.filtered));
  // Keys the kernel took out of the map at their process's exit (loupe/handover.bpf.h), and
  // those it left for user space's eviction: no room in the handover ring, or never listed
  // (32 a process, 512 processes at once).
  metric("keys_handed_over", static_cast<double>(c.handed_over));
  metric("keys_left_at_exit", static_cast<double>(c.handover_full));
  metric("keys_not_listed_for_exit", static_cast<double>(c.handover_unlisted));

  const sdk::HealthRow rows[] = {
      {"cpusample/user_stack_efault", c.user_efault,
       "user stacks that could not be read (page not resident, no frame pointers)", c.samples,
       "samples", LOUPE_HEALTH_EFFECT_DEGRADED},
      {"cpusample/user_stack_eexist", c.user_eexist,
       "user stacks dropped: stack map full or hash collision (raise max_stacks)", c.samples,
       "samples", LOUPE_HEALTH_EFFECT_DEGRADED},
      {"cpusample/user_stack_error", c.user_other, "user stacks failed for another reason",
       c.samples, "samples", LOUPE_HEALTH_EFFECT_DEGRADED},
      {"cpusample/kernel_stack_efault", c.kernel_efault,
       "kernel-mode samples without a kernel stack", c.samples, "samples",
       LOUPE_HEALTH_EFFECT_DEGRADED},
      {"cpusample/kernel_stack_eexist", c.kernel_eexist,
       "kernel stacks dropped: stack map full or hash collision (raise max_stacks)", c.samples,
       "samples", LOUPE_HEALTH_EFFECT_DEGRADED},
      {"cpusample/kernel_stack_error", c.kernel_other, "kernel stacks failed for another reason",
       c.samples, "samples", LOUPE_HEALTH_EFFECT_DEGRADED},
      {"cpusample/counts_full", c.counts_full,
       "samples lost: the aggregation map is full (raise max_keys)", c.samples, "samples",
       LOUPE_HEALTH_EFFECT_LOST},
      {"cpusample/truncated_stacks", truncated,
       "samples whose stack filled its map's depth (user 127 frames, kernel kernel_stack_depth) "
       "and may have lost its root",
       c.samples, "samples", LOUPE_HEALTH_EFFECT_DEGRADED},
  };
  sdk::emit_health_rows(host_, "stacks", rows, is_final, ws, we);
  if (maps_.thinning && maps_.thinning->highest() > 1) {
    const sdk::HealthRow thinned[] = {maps_.thinning->row("cpusample/thinned", c.thinned)};
    sdk::emit_health_rows(host_, "stacks", thinned, is_final, ws, we);
  }
  if (is_final && c.samples == 0) {
    sdk::RecordBuilder rb(LOUPE_RECORD_HEALTH, "silent_probe");
    rb.final(true).window(ws, we);
    rb.health(LOUPE_HEALTH_OK, "cpusample", 1,
              "no sample was counted (the target ran for less than a sampling period, was "
              "idle, or was filtered out)");
    rb.emit(host_);
  }
}

}  // namespace loupe::cpusample
