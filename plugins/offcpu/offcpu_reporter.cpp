// SPDX-License-Identifier: Apache-2.0
#include "offcpu_reporter.hpp"

#include <bpf/bpf.h>

#include <algorithm>
#include <cstring>

#include "loupe/sdk/histogram.hpp"
#include "loupe/sdk/percpu.hpp"
#include "loupe/sdk/records.hpp"
#include "loupe/sdk/unwind.hpp"

namespace loupe::offcpu {
namespace {

template <typename T>
std::string bytes_of(const char* tag, const T& v) {
  std::string s(tag);
  s.append(reinterpret_cast<const char*>(&v), sizeof(v));
  return s;
}

std::string comm_of(const char* c) {
  return std::string(c, strnlen(c, OC_COMM_LEN));
}

// Rows differ by waker too; the plain view sums them per (process, stacks, reason).
std::string plain_key(oc_key k) {
  k.waker_tgid = 0;
  k.waker_user_stack_id = k.waker_kernel_stack_id = -1;
  std::memset(k.waker_comm, 0, sizeof(k.waker_comm));
  return bytes_of("", k);
}

}  // namespace

const char* reason_name(std::uint32_t reason) {
  switch (reason) {
    case OC_REASON_SLEEP: return "sleep";
    case OC_REASON_DISK: return "uninterruptible";
    case OC_REASON_PREEMPTED: return "preempted";
    case OC_REASON_IDLE: return "idle";
    case OC_REASON_OTHER: return "other";
  }
  return "unknown";
}

OffcpuReporter::OffcpuReporter(const sdk::Host& host, ReporterMaps maps, ReporterOptions opts)
    : host_(host),
      maps_(maps),
      opts_(std::move(opts)),
      frames_(host, maps.stacks_fd, OC_MAX_STACK_DEPTH),
      user_frames_(host, maps.user_stacks_fd >= 0 ? maps.user_stacks_fd : maps.stacks_fd,
                   OC_MAX_STACK_DEPTH) {}

OffcpuReporter::Frames OffcpuReporter::stack_of(std::uint32_t tgid, std::int32_t user,
                                                std::int32_t kernel) {
  Frames out = frames_.kernel(kernel);
  const Frames& u = user_frames_.user(tgid, user);
  out.insert(out.end(), u.begin(), u.end());
  return out;
}

std::uint64_t OffcpuReporter::delta(const std::string& key, std::uint64_t total, bool is_final) {
  if (is_final) return total;
  std::uint64_t& prev = previous_.at(key);
  // A kernel key only grows while it lives; a lower total is the same bytes made again
  // after a handover, counted once the handed-over key's total is forgotten (evict()).
  if (total <= prev) return 0;
  std::uint64_t d = total - prev;
  prev = total;
  return d;
}

void OffcpuReporter::handed_over(const oc_key& key, const oc_val& value) {
  std::lock_guard lock(handed_mu_);
  handed_[bytes_of("h", key)] = {key, value};
}

void OffcpuReporter::emit_offcpu(bool is_final) {
  // What each row adds in this interval (at the final report, the whole run's).
  struct Added {
    oc_key key;
    std::uint64_t ns = 0, n = 0;
    std::uint64_t whole_n = 0;  // the keys' totals, for the truncated-stacks row
  };
  std::map<std::string, Added> plain;
  std::vector<Added> woken;
  read_keys_.clear();
  // Deltas are taken per kernel key, then summed per row: a plain row sums keys that leave
  // at different reports (handed over, evicted, in flight between the two), and only a key's
  // own previous total says what of it was counted already.
  auto add = [&](const oc_key& k, const oc_val& v) {
    const std::string id = bytes_of("k", k);
    Added a{k, delta(id + "ns", v.total_ns, is_final), delta(id + "n", v.count, is_final)};
    Added& row = plain.try_emplace(plain_key(k), Added{k}).first->second;
    row.ns += a.ns;
    row.n += a.n;
    row.whole_n += v.count;
    if (opts_.wakers && k.waker_tgid != 0) woken.push_back(a);
  };
  // Keys the kernel handed over as their process exited, taken before the map is read: the
  // kernel deletes a key before its record can arrive, so one handed over after this is
  // not in the read below either, and none is counted twice.
  {
    std::lock_guard lock(handed_mu_);
    handed_read_.clear();
    for (const auto& [kb, kv] : handed_) handed_read_.push_back(kv);
  }
  for (const auto& [k, v] : handed_read_) add(k, v);
  sdk::for_each_entry<oc_key, oc_val>(maps_.offcpu_fd, [&](const oc_key& k, const oc_val& v) {
    read_keys_.emplace_back(k, v);
    add(k, v);
  });

  std::uint64_t total_ns = 0, blocks = 0;
  auto emit = [&](const char* name, const Added& a, const Frames& frames, bool with_waker) {
    if (a.n == 0 && a.ns == 0) return;
    const oc_key& k = a.key;
    sdk::RecordBuilder rb(LOUPE_RECORD_STACK_SAMPLE, name);
    rb.label("pid", std::to_string(k.tgid)).label("comm", comm_of(k.comm));
    if (opts_.per_thread) rb.label("tid", std::to_string(k.tid));
    rb.label("reason", reason_name(k.reason));
    if (with_waker)
      rb.label("waker_pid", std::to_string(k.waker_tgid))
          .label("waker_comm", comm_of(k.waker_comm));
    rb.final(is_final).window(ws_, we_);
    rb.value("offcpu_ns", "ns", static_cast<std::int64_t>(a.ns))
        .value("blocks", "count", static_cast<std::int64_t>(a.n));
    // cpusample's records carry their on-CPU estimate under the same name: a folded sink
    // with value = "time_ns" draws a thread's whole life (profiles/wall.toml).
    if (!with_waker) rb.value("time_ns", "ns", static_cast<std::int64_t>(a.ns));
    rb.frames(frames.data(), static_cast<std::uint32_t>(frames.size())).emit(host_);
    if (!with_waker) {
      total_ns += a.ns;
      blocks += a.n;
    }
  };
  truncated_ = 0;
  for (const auto& [id, a] : plain) {
    const oc_key& k = a.key;
    emit("offcpu", a, stack_of(k.tgid, k.user_stack_id, k.kernel_stack_id), false);
    if (frames_.kernel_cut(k.kernel_stack_id) || user_frames_.user_cut(k.tgid, k.user_stack_id))
      truncated_ += a.whole_n;
  }
  for (const Added& a : woken) {
    const oc_key& k = a.key;
    // offwaketime's layout, leaf first as records are: the waker's frames root first,
    // then "--", then the wakee's leaf first; a folded line then reads wakee root..leaf,
    // --, waker leaf..root.
    Frames waker = stack_of(k.waker_tgid, k.waker_user_stack_id, k.waker_kernel_stack_id);
    Frames both(waker.rbegin(), waker.rend());
    loupe_frame sep{};
    sep.symbol = "--";
    sep.kind = LOUPE_FRAME_KERNEL;
    sep.resolution = LOUPE_UNRESOLVED_NOT_ATTEMPTED;
    both.push_back(sep);
    Frames wakee = stack_of(k.tgid, k.user_stack_id, k.kernel_stack_id);
    both.insert(both.end(), wakee.begin(), wakee.end());
    emit("offcpu_wakers", a, both, true);
  }
  auto metric = [&](const char* name, const char* unit, double v) {
    sdk::RecordBuilder rb(LOUPE_RECORD_METRIC, name);
    rb.final(is_final).window(ws_, we_).metric(LOUPE_METRIC_COUNTER, unit, v).emit(host_);
  };
  metric("offcpu_ns_total", "ns", static_cast<double>(total_ns));
  metric("offcpu_blocks", "count", static_cast<double>(blocks));
}

void OffcpuReporter::emit_in_flight() {
  // In flight as of the session's stop (the window's end), not of this collect: it runs
  // after the detach and drain, when threads woken meanwhile (some since exited and reaped)
  // still hold the entry their switch-in would have deleted. A block that began after the
  // stop was not in flight at it.
  const std::uint64_t now = host_.monotonic_at_wall(we_);
  sdk::for_each_entry<std::uint32_t, oc_blocked>(
      maps_.blocked_fd, [&](std::uint32_t tid, const oc_blocked& b) {
        if (b.running || now <= b.ts_out) return;
        Frames f = stack_of(b.tgid, b.user_stack_id, b.kernel_stack_id);
        sdk::RecordBuilder rb(LOUPE_RECORD_STACK_SAMPLE, "offcpu_in_flight");
        rb.label("pid", std::to_string(b.tgid)).label("comm", comm_of(b.comm));
        rb.label("tid", std::to_string(tid)).label("reason", reason_name(b.reason));
        rb.final(true).window(ws_, we_);
        rb.value("offcpu_ns", "ns", static_cast<std::int64_t>(now - b.ts_out))
            .value("blocks", "count", 1);
        rb.frames(f.data(), static_cast<std::uint32_t>(f.size())).emit(host_);
      });
}

void OffcpuReporter::emit_runq(bool is_final) {
  if (!opts_.run_queue) return;
  auto emit = [&](const std::string& key, const oc_hist& total, const char* label,
                  const std::string& value, const std::string* comm) {
    oc_hist h = total;
    if (!is_final) {
      oc_hist& before = previous_hist_.at(key);
      h = sdk::hist_interval_delta(total, before);
      before = total;
    }
    if (h.count == 0) return;
    sdk::RecordBuilder rb(LOUPE_RECORD_HISTOGRAM, "runq_latency");
    rb.label(label, value);
    if (comm) rb.label("comm", *comm);
    rb.final(is_final).window(ws_, we_);
    sdk::add_histogram(rb, "ns", h).emit(host_);
  };
  read_procs_.clear();
  sdk::for_each_per_cpu_entry<ProcKey, oc_hist>(
      maps_.runq_procs_fd, [&](const ProcKey& k, const std::vector<oc_hist>& per_cpu) {
        read_procs_.push_back(k);
        const oc_hist h = sdk::hist_merge_per_cpu<oc_hist>(per_cpu);
        const std::string comm = comm_of(k.comm);
        emit(bytes_of("p", k), h, "pid", std::to_string(k.tgid), &comm);
      });
  std::uint32_t zero = 0;
  auto per_cpu = sdk::read_per_cpu<oc_hist>(maps_.runq_cpus_fd, &zero);
  for (std::size_t cpu = 0; cpu < per_cpu.size(); ++cpu)
    emit("cpu" + std::to_string(cpu), per_cpu[cpu], "cpu", std::to_string(cpu), nullptr);
}

void OffcpuReporter::emit_blockers(bool is_final) {
  if (opts_.runq_threshold_ns == 0) return;
  read_blockers_.clear();
  sdk::for_each_entry<oc_blocker_key, oc_blocker_val>(
      maps_.blockers_fd, [&](const oc_blocker_key& k, const oc_blocker_val& v) {
        read_blockers_.push_back(k);
        const std::uint64_t n = delta(bytes_of("bn", k), v.count, is_final);
        const std::uint64_t ns = delta(bytes_of("bd", k), v.delay_ns, is_final);
        if (n == 0) return;
        Frames f = stack_of(k.tgid, k.user_stack_id, k.kernel_stack_id);
        sdk::RecordBuilder rb(LOUPE_RECORD_STACK_SAMPLE, "runq_blockers");
        rb.label("pid", std::to_string(k.tgid)).label("comm", comm_of(k.comm));
        rb.final(is_final).window(ws_, we_);
        rb.value("waits", "count", static_cast<std::int64_t>(n))
            .value("delay_ns", "ns", static_cast<std::int64_t>(ns));
        rb.frames(f.data(), static_cast<std::uint32_t>(f.size())).emit(host_);
      });
}

void OffcpuReporter::emit_health(bool is_final) {
  std::uint32_t zero = 0;
  const auto c = sdk::read_per_cpu_sum<oc_counters>(maps_.counters_fd, &zero);
  // The map's totals since the session began (the stacks and sums above are deltas).
  auto metric = [&](const char* name, double v, const char* unit = "count") {
    sdk::RecordBuilder rb(LOUPE_RECORD_METRIC, name);
    rb.final(is_final).window(session_start_, we_).metric(LOUPE_METRIC_COUNTER, unit, v);
    rb.emit(host_);
  };
  metric("switches_out", static_cast<double>(c.switches_out));
  // Every block that ended: kept in a row (offcpu_blocks) or counted in offcpu/keys_full.
  metric("blocks_ended", static_cast<double>(c.blocks));
  metric("blocks_below_min", static_cast<double>(c.below_min));
  if (opts_.run_queue || opts_.wakers) metric("wakeups", static_cast<double>(c.wakeups));
  if (opts_.run_queue) metric("runq_waits", static_cast<double>(c.runq_waits));
  // A missed switch-in loses nothing: the block's time is what the thread's CPU time did not
  // take until its next switch-out, and is counted under the block's stacks.
  metric("missed_switch_ins_recovered", static_cast<double>(c.missed_ins));
  metric("missed_switch_in_recovered_ns", static_cast<double>(c.recovered_ns), "ns");
  // Keys the kernel took out of the map at their process's exit (loupe/handover.bpf.h), and
  // those it left for user space's eviction: no room in the handover ring, or never listed
  // (32 a process, 512 processes at once).
  metric("keys_handed_over", static_cast<double>(c.handed_over));
  metric("keys_left_at_exit", static_cast<double>(c.handover_full));
  metric("keys_not_listed_for_exit", static_cast<double>(c.handover_unlisted));
  const sdk::HealthRow rows[] = {
      {"offcpu/blocked_full", c.blocked_full,
       "blocks lost: too many threads off the CPU at once (raise max_threads)", c.switches_out,
       "switch-outs", LOUPE_HEALTH_EFFECT_LOST},
      {"offcpu/keys_full", c.keys_full,
       "blocks not aggregated: too many distinct (process, stacks, reason, waker) keys (raise "
       "max_keys); their time is in offcpu/lost_ns",
       c.switches_out, "switch-outs", LOUPE_HEALTH_EFFECT_DEGRADED},
      {"offcpu/lost_ns", c.lost_ns,
       "off-CPU nanoseconds not attributed to a stack (raise max_keys)", 0, nullptr,
       LOUPE_HEALTH_EFFECT_DEGRADED},
      {"offcpu/user_stack_fail", c.user_stack_fail,
       "user stacks that could not be taken (stack map full or collision: raise max_stacks)",
       c.switches_out, "switch-outs", LOUPE_HEALTH_EFFECT_DEGRADED},
      {"offcpu/kernel_stack_fail", c.kernel_stack_fail,
       "kernel stacks that could not be taken (raise max_stacks)", c.switches_out, "switch-outs",
       LOUPE_HEALTH_EFFECT_DEGRADED},
      {"offcpu/waker_stack_fail", c.waker_stack_fail,
       "waker stacks that could not be taken (raise max_stacks)", 0, nullptr,
       LOUPE_HEALTH_EFFECT_DEGRADED},
      {"offcpu/runq_procs_full", c.runq_procs_full,
       "run-queue waits only in the per-CPU histograms: too many processes (raise "
       "process_limit)",
       0, nullptr, LOUPE_HEALTH_EFFECT_DEGRADED},
      {"offcpu/blockers_full", c.blockers_full,
       "run-queue blockers not kept: the map is full (raise max_blockers)", 0, nullptr,
       LOUPE_HEALTH_EFFECT_LOST},
      // Now and then a switch never reaches the program (README "Switches the program did
      // not see"): noticed at the thread's next switch, told apart from what was recovered.
      {"offcpu/missed_switch_outs", c.missed_outs,
       "switch-outs the program never saw: those blocks' time is in offcpu/missed_out_ns, "
       "without stacks or reason",
       c.switches_out + c.missed_outs, "switch-outs", LOUPE_HEALTH_EFFECT_DEGRADED},
      {"offcpu/truncated_stacks", truncated_,
       "blocks whose stack filled its map's depth (user 127 frames, kernel kernel_stack_depth) "
       "and may have lost its root",
       c.blocks, "blocks", LOUPE_HEALTH_EFFECT_DEGRADED},
      {"offcpu/missed_out_ns", c.missed_out_ns,
       "off-CPU nanoseconds of blocks whose switch-out was not delivered", 0, nullptr,
       LOUPE_HEALTH_EFFECT_DEGRADED},
  };
  sdk::emit_health_rows(host_, "offcpu", rows, is_final, ws_, we_);
  if (maps_.thinning && maps_.thinning->highest() > 1) {
    const sdk::HealthRow thinned[] = {maps_.thinning->row("offcpu/thinned", c.thinned)};
    sdk::emit_health_rows(host_, "offcpu", thinned, is_final, ws_, we_);
  }
  if (maps_.unwind_stats_fd >= 0)
    sdk::emit_unwind_health(host_, "offcpu", maps_.unwind_stats_fd, is_final, ws_, we_);
  if (opts_.evict) evicted_.emit(host_, "offcpu", "offcpu", is_final, ws_, we_);
  if (is_final && c.switches_out == 0) {
    sdk::RecordBuilder rb(LOUPE_RECORD_HEALTH, "silent_probe");
    rb.final(true).window(ws_, we_);
    rb.health(LOUPE_HEALTH_OK, "offcpu", 1,
              "no thread of the target left a CPU (" + opts_.mechanism + " sched_switch)");
    rb.emit(host_);
  }
}

void OffcpuReporter::collect(bool is_final, std::uint64_t ws, std::uint64_t we) {
  ws_ = ws;
  we_ = we;
  if (!session_start_) session_start_ = ws;
  // Settled before the reads: they then hold all these processes ever counted.
  const bool evicting = opts_.evict && evict_now_ && !is_final;
  std::set<std::uint32_t> gone;
  if (evicting) {
    gone = sdk::exited(tgids_read_);
    // A wake-up an exited process made is charged to its key when the wakee runs: until
    // then (the blocked entry names it), its keys stay. Looked at before the read, so a
    // wakee that runs after it was looked at is in the read.
    if (!gone.empty())
      sdk::for_each_entry<std::uint32_t, oc_blocked>(maps_.blocked_fd,
                                                     [&](std::uint32_t, const oc_blocked& b) {
                                                       if (!b.running && b.ts_wake)
                                                         gone.erase(b.waker_tgid);
                                                     });
  }
  if (is_final) user_frames_.rename_unnamed_now();
  emit_offcpu(is_final);
  if (is_final) emit_in_flight();
  emit_runq(is_final);
  emit_blockers(is_final);
  if (evicting) evict(gone);
  emit_health(is_final);
}

// Exited processes' keys (as woken thread or as waker) that the report just read, the
// stack ids only they used, and what the caches hold for them.
void OffcpuReporter::evict(const std::set<std::uint32_t>& gone) {
  const int kfd = maps_.stacks_fd, ufd = user_store_fd();
  sdk::StackSweep sweep;
  auto stacks = [&](bool keep, std::int32_t user, std::int32_t kernel) {
    if (keep) {
      sweep.kept(ufd, user);
      sweep.kept(kfd, kernel);
    } else {
      sweep.evicted(ufd, user);
      sweep.evicted(kfd, kernel);
    }
  };
  auto drop = [&](int fd, const auto& key) {
    if (bpf_map_delete_elem(fd, &key) == 0) ++evicted_.keys;
  };
  auto forget = [&](const oc_key& k) {
    previous_.erase(bytes_of("k", k) + "ns");
    previous_.erase(bytes_of("k", k) + "n");
    stacks(false, k.user_stack_id, k.kernel_stack_id);
    stacks(false, k.waker_user_stack_id, k.waker_kernel_stack_id);
  };
  for (const auto& [k, v] : read_keys_) {
    if (!gone.count(k.tgid) && !gone.count(k.waker_tgid)) continue;
    // Not there any more: the kernel handed it over since the read (a process reaped before
    // its last thread's final switch). Its record brings the whole total, and the key's
    // previous total must stay until then to say what of it was counted already.
    if (bpf_map_delete_elem(maps_.offcpu_fd, &k) != 0) {
      stacks(true, k.user_stack_id, k.kernel_stack_id);
      stacks(true, k.waker_user_stack_id, k.waker_kernel_stack_id);
      continue;
    }
    ++evicted_.keys;
    forget(k);
  }
  // Handed over at their exit and now reported: their totals and stacks may go.
  std::set<std::uint32_t> handed_tgids;
  for (const auto& [k, v] : handed_read_) {
    {
      std::lock_guard lock(handed_mu_);
      handed_.erase(bytes_of("h", k));
    }
    handed_tgids.insert(k.tgid);
    forget(k);
  }
  handed_read_.clear();
  for (const oc_blocker_key& k : read_blockers_) {
    if (!gone.count(k.tgid)) continue;
    drop(maps_.blockers_fd, k);
    previous_.erase(bytes_of("bn", k));
    previous_.erase(bytes_of("bd", k));
    stacks(false, k.user_stack_id, k.kernel_stack_id);
  }
  for (const ProcKey& k : read_procs_) {
    if (!gone.count(k.tgid)) continue;
    drop(maps_.runq_procs_fd, k);
    previous_hist_.erase(bytes_of("p", k));
  }

  // What stays, read after the deletes: every key made since the report, and the stacks
  // of threads off the CPU now (their key is made when they run again).
  sweep.orphans(kfd, &unreferenced_[kfd]);
  if (ufd != kfd) sweep.orphans(ufd, &unreferenced_[ufd]);
  std::set<std::uint32_t> read;
  sdk::for_each_entry<oc_key, oc_val>(maps_.offcpu_fd, [&](const oc_key& k, const oc_val&) {
    read.insert(k.tgid);
    if (k.waker_tgid) read.insert(k.waker_tgid);
    stacks(true, k.user_stack_id, k.kernel_stack_id);
    stacks(true, k.waker_user_stack_id, k.waker_kernel_stack_id);
  });
  sdk::for_each_entry<oc_blocker_key, oc_blocker_val>(
      maps_.blockers_fd, [&](const oc_blocker_key& k, const oc_blocker_val&) {
        read.insert(k.tgid);
        stacks(true, k.user_stack_id, k.kernel_stack_id);
      });
  sdk::for_each_entry<std::uint32_t, oc_blocked>(
      maps_.blocked_fd, [&](std::uint32_t, const oc_blocked& b) {
        stacks(true, b.user_stack_id, b.kernel_stack_id);
        stacks(true, b.waker_user_stack_id, b.waker_kernel_stack_id);
      });
  for (const ProcKey& k : sdk::map_keys<ProcKey>(maps_.runq_procs_fd)) read.insert(k.tgid);
  {
    // Handed over since the report's read: reported at the next one.
    std::lock_guard lock(handed_mu_);
    for (const auto& [kb, kv] : handed_) {
      stacks(true, kv.first.user_stack_id, kv.first.kernel_stack_id);
      stacks(true, kv.first.waker_user_stack_id, kv.first.waker_kernel_stack_id);
    }
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
  const std::set<std::int32_t>& kernel_freed = freed[kfd];
  const std::set<std::int32_t>& user_freed = freed[ufd];
  frames_.forget_ids(kernel_freed);
  user_frames_.forget_ids(user_freed);
  evicted_.processes += gone.size();
  // A block that took a freed id between the read above and the delete: counted, since its
  // id may now name another stack.
  if (!kernel_freed.empty() || !user_freed.empty())
    sdk::for_each_entry<oc_key, oc_val>(maps_.offcpu_fd, [&](const oc_key& k, const oc_val& v) {
      const bool wakee = kernel_freed.count(k.kernel_stack_id) || user_freed.count(k.user_stack_id);
      const bool waker =
          kernel_freed.count(k.waker_kernel_stack_id) || user_freed.count(k.waker_user_stack_id);
      if (wakee || waker) evicted_.in_use += v.count;
    });
  tgids_read_ = std::move(read);
}

}  // namespace loupe::offcpu
