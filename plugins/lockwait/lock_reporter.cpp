// SPDX-License-Identifier: Apache-2.0
#include "lock_reporter.hpp"

#include <bpf/bpf.h>
#include <bpf/libbpf.h>

#include <algorithm>
#include <cstdio>
#include <cstring>

#include "loupe/sdk/percpu.hpp"
#include "loupe/sdk/records.hpp"
#include "loupe/sdk/units.hpp"
#include "wait_pattern.hpp"

namespace loupe::lockwait {
namespace {

std::string hex(std::uint64_t v) {
  char buf[24];
  std::snprintf(buf, sizeof(buf), "0x%llx", static_cast<unsigned long long>(v));
  return buf;
}

const char* kind_name(std::uint32_t kind) {
  return kind == LW_KIND_KERNEL ? "kernel" : "futex";
}

}  // namespace

LockReporter::LockReporter(const sdk::Host& host, ReporterMaps maps, ReporterOptions opts,
                           SymbolCache& symbols)
    : host_(host), maps_(maps), opts_(std::move(opts)), symbols_(symbols) {}

std::vector<std::uint64_t> LockReporter::read_counters() const {
  std::vector<std::uint64_t> sum(LW_C_NR, 0);
  for (std::uint32_t i = 0; i < LW_C_NR; ++i)
    sum[i] = sdk::read_per_cpu_sum<std::uint64_t>(maps_.counters_fd, &i);
  return sum;
}

std::uint64_t LockReporter::sweep_inflight() {
  std::uint64_t now = host_.now_ns(), in_flight = 0;
  std::vector<lw_inflight_key> stale;
  std::uint64_t expired = 0;
  sdk::for_each_entry<lw_inflight_key, lw_inflight_val>(
      maps_.inflight_fd, [&](const lw_inflight_key& k, const lw_inflight_val& v) {
        bool old = now > v.start_ns && now - v.start_ns > opts_.max_age_ns;
        if (v.idle) {
          // A thread's slot between waits; one whose thread stayed away (or died) longer
          // than max_age is dropped, losing nothing.
          if (old) stale.push_back(k);
        } else if (old) {
          stale.push_back(k);
          ++expired;
        } else {
          ++in_flight;
        }
      });
  // Deleting after the walk keeps get_next_key from restarting at the head.
  for (const auto& k : stale) bpf_map_delete_elem(maps_.inflight_fd, &k);
  expired_swept_ += expired;
  return in_flight;
}

void LockReporter::emit_stacks(const LockSummary& s, const std::string& lock_label) {
  std::uint32_t n = 0;
  for (const auto& st : s.stacks) {
    if (opts_.stacks_per_lock && n++ >= opts_.stacks_per_lock) break;
    SymbolCache::Frames frames;
    if (st.kernel_stack_id >= 0) frames = symbols_.kernel_stack(st.kernel_stack_id);
    if (st.user_stack_id >= 0) {
      auto u = symbols_.user_stack(s.key.tgid, st.user_stack_id, st.caller_ip);
      frames.insert(frames.end(), u.begin(), u.end());  // leaf first: kernel, then user
    }
    sdk::RecordBuilder rb(LOUPE_RECORD_STACK_SAMPLE, "lock_wait");
    rb.label("lock", lock_label)
        .label("addr", hex(s.key.addr))
        .label("kind", kind_name(s.key.kind));
    if (s.key.tgid) rb.label("pid", std::to_string(s.key.tgid));
    if (!st.comm.empty()) rb.label("comm", st.comm);
    if (st.user_stack_id < 0 && st.kernel_stack_id < 0) rb.label("stack", "unavailable");
    rb.final(is_final_).window(window_start_, window_end_);
    rb.frames(frames.data(), static_cast<std::uint32_t>(frames.size()));
    rb.value("wait_ns", "ns", static_cast<std::int64_t>(st.total_ns));
    rb.value("waits", "count", static_cast<std::int64_t>(st.waits));
    rb.emit(host_);
  }
}

void LockReporter::emit_holders(const LockSummary& s, const std::string& lock_label) {
  if (s.key.kind != LW_KIND_FUTEX) return;
  std::vector<const std::pair<lw_holder_key, lw_holder_val>*> rows;
  for (const auto& h : holders_)
    if (h.first.tgid == s.key.tgid && h.first.addr == s.key.addr) rows.push_back(&h);
  std::sort(rows.begin(), rows.end(),
            [](const auto* a, const auto* b) { return a->second.total_ns > b->second.total_ns; });
  std::uint32_t n = 0;
  for (const auto* h : rows) {
    if (opts_.stacks_per_lock && n++ >= opts_.stacks_per_lock) break;
    const SymbolCache::Frames frames = h->first.user_stack_id >= 0
                                           ? symbols_.user_stack(s.key.tgid, h->first.user_stack_id)
                                           : SymbolCache::Frames{};
    const std::string comm(h->second.comm, strnlen(h->second.comm, sizeof(h->second.comm)));
    sdk::RecordBuilder rb(LOUPE_RECORD_STACK_SAMPLE, "lock_holder");
    rb.label("lock", lock_label).label("addr", hex(s.key.addr)).label("kind", "futex");
    rb.label("pid", std::to_string(s.key.tgid));
    if (!comm.empty()) rb.label("comm", comm);
    if (frames.empty()) rb.label("stack", "unavailable");
    rb.final(is_final_).window(window_start_, window_end_);
    rb.frames(frames.data(), static_cast<std::uint32_t>(frames.size()));
    rb.value("wait_ns", "ns", static_cast<std::int64_t>(h->second.total_ns));
    rb.value("waits", "count", static_cast<std::int64_t>(h->second.waits));
    rb.emit(host_);
  }
}

void LockReporter::emit_lock(std::uint32_t rank, const LockSummary& s, double window_s) {
  LockName name = symbols_.lock_name(s.key.kind == LW_KIND_KERNEL ? 0 : s.key.tgid, s.key.addr);
  std::string label = SymbolCache::label(name, s.key.addr);
  std::string type = lock_type(s.key.kind, s.val.flags);
  WaitShape shape{s.val.waits,
                  s.val.total_ns,
                  hist_p50(s.val),
                  s.val.max_ns,
                  static_cast<std::uint32_t>(s.threads.size()),
                  window_s};
  PatternHint hint = classify(shape);

  auto labels = [&](sdk::RecordBuilder& rb) -> sdk::RecordBuilder& {
    rb.label("lock", label).label("addr", hex(s.key.addr)).label("kind", kind_name(s.key.kind));
    rb.label("type", type);
    if (s.key.tgid) rb.label("pid", std::to_string(s.key.tgid));
    rb.label("rank", std::to_string(rank));
    return rb.final(is_final_).window(window_start_, window_end_);
  };

  std::vector<std::uint64_t> slots(s.val.slots, s.val.slots + LW_HIST_SLOTS);
  sdk::RecordBuilder h(LOUPE_RECORD_HISTOGRAM, "lock_wait");
  labels(h).label("pattern", to_string(hint.pattern));
  h.log2_histogram("ns", slots, s.val.waits, s.val.total_ns, s.val.min_ns, s.val.max_ns);
  h.emit(host_);

  auto metric = [&](const char* n, loupe_metric_type t, const char* unit, double v) {
    sdk::RecordBuilder rb(LOUPE_RECORD_METRIC, n);
    labels(rb).metric(t, unit, v).emit(host_);
  };
  metric("lock_wait_total", LOUPE_METRIC_COUNTER, "ns", static_cast<double>(s.val.total_ns));
  metric("lock_waits", LOUPE_METRIC_COUNTER, "count", static_cast<double>(s.val.waits));
  metric("lock_wait_max", LOUPE_METRIC_GAUGE, "ns", static_cast<double>(s.val.max_ns));

  sdk::RecordBuilder ev(LOUPE_RECORD_EVENT, "lock");
  labels(ev).event_time(host_.now_ns(LOUPE_CLOCK_REALTIME));
  ev.field_u("rank", rank).field("lock", label).field("addr", hex(s.key.addr));
  ev.field("kind", std::string(kind_name(s.key.kind))).field("type", type);
  if (!name.module.empty()) ev.field("module", name.module);
  ev.field_u("waits", s.val.waits).field_u("total_ns", s.val.total_ns);
  ev.field_u("max_ns", s.val.max_ns).field_u("p50_ns", shape.p50_ns);
  ev.field_u("mean_ns", s.val.waits ? s.val.total_ns / s.val.waits : 0);
  ev.field_u("threads", s.threads.size());
  ev.field("pattern", std::string(to_string(hint.pattern))).field("hint", hint.text);
  ev.emit(host_);

  std::uint32_t n = 0;
  for (const auto& t : s.threads) {
    if (n++ >= opts_.threads_per_lock) break;
    sdk::RecordBuilder rb(LOUPE_RECORD_METRIC, "thread_wait_total");
    labels(rb).label("tid", std::to_string(t.tid)).label("comm", t.comm);
    rb.metric(LOUPE_METRIC_COUNTER, "ns", static_cast<double>(t.total_ns)).emit(host_);
    sdk::RecordBuilder w(LOUPE_RECORD_METRIC, "thread_waits");
    labels(w).label("tid", std::to_string(t.tid)).label("comm", t.comm);
    w.metric(LOUPE_METRIC_COUNTER, "count", static_cast<double>(t.waits)).emit(host_);
  }
  emit_stacks(s, label);
  emit_holders(s, label);
  if (is_final_) emit_finding(rank, s, label, type, window_s);
}

// Rule lock_contention (README): among the 3 locks waited on longest, one whose waiting
// threads spent at least 5 % of their time waiting on it. "Their time" is, per thread,
// from the start of its first wait on the lock to the end of its last: lifetimes are not
// traced, and this span is the part of a thread's life the lock had a say in. The
// statement says so.
void LockReporter::emit_finding(std::uint32_t rank, const LockSummary& s, const std::string& label,
                                const std::string& type, double window_s) {
  (void)window_s;
  constexpr std::uint32_t kTopLocks = 3;
  constexpr double kMinShare = 0.05;
  constexpr std::uint64_t kMinWaits = 10;
  const std::size_t threads = s.threads.size();
  // Two threads at least: one thread alone on a futex is waiting for an event (a
  // pthread_join waits on the joined thread's own word), not contending with anyone.
  // Futexes do not say what they implement: a condition variable that several idle
  // workers wait on counts too (README).
  if (rank > kTopLocks || threads < 2 || s.val.waits < kMinWaits) return;
  std::uint64_t span_ns = 0, wait_ns = 0;
  for (const auto& t : s.threads) {
    wait_ns += t.total_ns;
    if (t.last_ns > t.first_ns) span_ns += t.last_ns - t.first_ns;
  }
  if (span_ns == 0) return;
  const double share = static_cast<double>(wait_ns) / static_cast<double>(span_ns);
  if (share < kMinShare) return;
  char buf[512];
  std::snprintf(buf, sizeof(buf),
                "lock %s (%s%s%s): %zu thread%s waited %s in %llu waits, %.0f %% of their %s "
                "from each one's first wait to its last",
                label.c_str(), type.c_str(), s.key.tgid ? ", pid " : "",
                s.key.tgid ? std::to_string(s.key.tgid).c_str() : "", threads,
                threads == 1 ? "" : "s",
                sdk::human_amount(static_cast<double>(wait_ns), "ns").c_str(),
                static_cast<unsigned long long>(s.val.waits), 100 * share,
                sdk::human_amount(static_cast<double>(span_ns), "ns").c_str());
  sdk::RecordBuilder f(LOUPE_RECORD_FINDING, "lock_contention");
  f.label("lock", label).label("addr", hex(s.key.addr));
  if (s.key.tgid) f.label("pid", std::to_string(s.key.tgid));
  f.final(true)
      .window(window_start_, window_end_)
      .finding("lock_contention", buf, std::min(share, 1.0));
  f.field("lock", label).field("addr", hex(s.key.addr)).field_u("pid", s.key.tgid);
  f.field_u("threads", threads).field_u("waits", s.val.waits).field_u("wait_ns", wait_ns);
  f.field_u("threads_span_ns", span_ns).field("share", share);
  f.emit(host_);
}

void LockReporter::emit_counters(const std::vector<std::uint64_t>& c) {
  auto metric = [&](const char* n, loupe_metric_type t, const char* unit, double v) {
    sdk::RecordBuilder rb(LOUPE_RECORD_METRIC, n);
    rb.final(is_final_).window(window_start_, window_end_).metric(t, unit, v).emit(host_);
  };
  metric("futex_waits", LOUPE_METRIC_COUNTER, "count", static_cast<double>(c[LW_C_FUTEX_MATCHED]));
  metric("kernel_waits", LOUPE_METRIC_COUNTER, "count",
         static_cast<double>(c[LW_C_KERNEL_MATCHED]));
  metric("futex_non_wait_ops", LOUPE_METRIC_COUNTER, "count",
         static_cast<double>(c[LW_C_NON_WAIT_OPS]));
  if (opts_.holders) {
    metric("futex_wakes", LOUPE_METRIC_COUNTER, "count", static_cast<double>(c[LW_C_WAKES]));
    metric("released_waits", LOUPE_METRIC_COUNTER, "count",
           static_cast<double>(c[LW_C_RELEASED_WAITS]));
  }
  if (opts_.pthread_stacks) {
    metric("pthread_calls", LOUPE_METRIC_COUNTER, "count",
           static_cast<double>(c[LW_C_PTHREAD_CALLS]));
    metric("pthread_attributed_waits", LOUPE_METRIC_COUNTER, "count",
           static_cast<double>(c[LW_C_PTHREAD_STACKS]));
  }

  auto health = [&](const char* n, std::uint64_t v, const std::string& why,
                    loupe_health_severity bad = LOUPE_HEALTH_WARN) {
    sdk::RecordBuilder rb(LOUPE_RECORD_HEALTH, n);
    rb.final(is_final_).window(window_start_, window_end_);
    rb.health(v ? bad : LOUPE_HEALTH_OK, "lockwait", v, v ? why : std::string());
    rb.emit(host_);
  };
  health("unmatched", c[LW_C_UNMATCHED],
         "wait ends without their begin, or begins replaced before their end (waits in "
         "progress when tracing started or stopped)");
  health("expired", c[LW_C_EXPIRED] + expired_swept_,
         "waits older than max_age_ms dropped: their end never came");
  health("discarded", c[LW_C_DISCARDED], "impossible durations (above max_age_ms) not recorded");
  health("inflight_full", c[LW_C_INFLIGHT_FULL],
         "the in-flight map was full: those waits are lost; raise max_inflight");
  health("locks_full", c[LW_C_LOCKS_FULL],
         "waits of locks the lock map had no room for: counted from the waiter rows, with no "
         "latency histogram; raise max_locks");
  health("waiters_full", c[LW_C_WAITERS_FULL],
         "the (lock, thread, stack) map was full: stacks and threads incomplete; raise "
         "max_waiters");
  health("lost_wait_ns", c[LW_C_LOST_NS],
         "wait time of waits the lock map refused: in their lock's totals (from the waiter "
         "rows), not in its latency histogram (raise max_locks)");
  health("stack_failures_user", c[LW_C_USTACK_FAIL],
         "user stacks not captured (stack map full or collision; raise max_stacks)");
  health("stack_failures_kernel", c[LW_C_KSTACK_FAIL],
         "kernel stacks not captured (stack map full or collision; raise max_stacks)");
  if (opts_.holders)
    health("holders_full", c[LW_C_HOLDERS_FULL],
           "waits whose releaser was not kept: the (lock, releaser stack) map is full; raise "
           "max_locks");
  if (opts_.holders)
    health("wakes_full", c[LW_C_WAKES_FULL],
           "futex wakes not kept (no memory for the wake map): their waits have no releaser; "
           "raise max_locks");
  if (opts_.pthread_stacks)
    health("pending_full", c[LW_C_PENDING_FULL],
           "pthread lock calls not kept (the entry map is full): their waits have the futex's "
           "shorter stack; raise max_inflight");
  health("first_seen_lost", c[LW_C_FIRST_SEEN_LOST],
         "first-seen records dropped: those locks and stacks are named at the end, which "
         "fails for processes that exited");
  if (is_final_) {
    if (opts_.futex && c[LW_C_FUTEX_BEGIN] == 0)
      health("silent_probe_futex", 1, "no futex wait was seen (nothing contended, or filtered out)",
             LOUPE_HEALTH_OK);
    if (opts_.kernel && c[LW_C_KERNEL_BEGIN] == 0)
      health("silent_probe_kernel", 1,
             "no kernel lock contention was seen (nothing contended, or filtered out)",
             LOUPE_HEALTH_OK);
  }
}

void LockReporter::collect(bool is_final, std::uint64_t window_start_ns,
                           std::uint64_t window_end_ns) {
  is_final_ = is_final;
  if (is_final) symbols_.rename_unnamed_now();
  if (!first_window_start_) first_window_start_ = window_start_ns;
  window_start_ = first_window_start_;  // cumulative since start
  window_end_ = window_end_ns;
  std::uint64_t in_flight = sweep_inflight();
  auto locks = sdk::map_entries<lw_lock_key, lw_lock_val>(maps_.locks_fd);
  holders_ = opts_.holders ? sdk::map_entries<lw_holder_key, lw_holder_val>(maps_.holders_fd)
                           : decltype(holders_){};
  auto waiters = sdk::map_entries<lw_waiter_key, lw_waiter_val>(maps_.waiters_fd);
  if (extra_waiters_)
    for (auto& row : extra_waiters_()) waiters.push_back(std::move(row));
  auto table = build_lock_table(locks, waiters);
  double window_s = window_end_ > window_start_ ? (window_end_ - window_start_) / 1e9 : 0;
  std::uint32_t rank = 0;
  for (const auto& s : table) {
    if (rank >= opts_.top) break;
    emit_lock(++rank, s, window_s);
  }
  sdk::RecordBuilder g(LOUPE_RECORD_METRIC, "locks_seen");
  g.final(is_final_)
      .window(window_start_, window_end_)
      .metric(LOUPE_METRIC_GAUGE, "count", static_cast<double>(table.size()))
      .emit(host_);
  sdk::RecordBuilder f(LOUPE_RECORD_METRIC, "in_flight");
  f.final(is_final_)
      .window(window_start_, window_end_)
      .metric(LOUPE_METRIC_GAUGE, "count", static_cast<double>(in_flight))
      .emit(host_);
  emit_counters(read_counters());
}

}  // namespace loupe::lockwait
