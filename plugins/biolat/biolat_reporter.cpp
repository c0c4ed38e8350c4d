// SPDX-License-Identifier: Apache-2.0
#include "biolat_reporter.hpp"

#include <bpf/bpf.h>
#include <bpf/libbpf.h>

#include <cstdio>
#include <cstring>

#include "bio_hist.hpp"
#include "bio_labels.hpp"
#include "loupe/sdk/histogram.hpp"
#include "loupe/sdk/records.hpp"
#include "loupe/sdk/units.hpp"

namespace loupe::biolat {
namespace {

std::uint64_t pack(const bio_stats_key& k) {
  return (static_cast<std::uint64_t>(k.dev) << 16) | (static_cast<std::uint64_t>(k.op) << 8) |
         k.sync;
}

}  // namespace

BiolatReporter::BiolatReporter(const sdk::Host& host, ReporterMaps maps, std::string mechanism)
    : host_(host),
      maps_(maps),
      mechanism_(std::move(mechanism)),
      ncpus_(libbpf_num_possible_cpus()) {}

void BiolatReporter::hist(const char* name, const char* unit, const bio_hist& h,
                          const Labels& labels) {
  sdk::RecordBuilder rb(LOUPE_RECORD_HISTOGRAM, name);
  for (const auto& [k, v] : labels) rb.label(k, v);
  rb.final(is_final_).window(window_start_, window_end_);
  sdk::add_histogram(rb, unit, h);
  rb.emit(host_);
}

void BiolatReporter::metric(const char* name, loupe_metric_type type, const char* unit, double v,
                            const Labels& labels, bool now) {
  sdk::RecordBuilder rb(LOUPE_RECORD_METRIC, name);
  for (const auto& [k, val] : labels) rb.label(k, val);
  rb.final(is_final_).window(now ? window_start_ : session_start_, window_end_);
  rb.metric(type, unit, v);
  rb.emit(host_);
}

void BiolatReporter::emit_device(const bio_stats_key& key, const bio_stats& total) {
  bio_stats report = total;
  if (!is_final_) {
    auto it = previous_.find(pack(key));
    if (it != previous_.end()) report = interval_delta(total, it->second);
    previous_[pack(key)] = total;
  }
  Labels labels = {{"device", devices_.name(key.dev)},
                   {"dev", dev_string(key.dev)},
                   {"op", op_name(key.op)},
                   {"sync", key.sync ? "true" : "false"},
                   {"mechanism", mechanism_}};
  // A row only merges made has no request of its own to time.
  if (total.total.count) {
    if (report.queue.count) hist("queue_latency", "ns", report.queue, labels);
    hist("service_latency", "ns", report.service, labels);
    hist("total_latency", "ns", report.total, labels);
    hist("request_size", "bytes", report.size, labels);
  }
  // Counters are cumulative over the session (their window starts with it); the
  // histograms above are this window's.
  metric("requests", LOUPE_METRIC_COUNTER, "count", static_cast<double>(total.total.count), labels);
  metric("bytes", LOUPE_METRIC_COUNTER, "bytes", static_cast<double>(total.bytes), labels);
  metric("sequential", LOUPE_METRIC_COUNTER, "count", static_cast<double>(total.sequential),
         labels);
  metric("random", LOUPE_METRIC_COUNTER, "count", static_cast<double>(total.random), labels);
  metric("errors", LOUPE_METRIC_COUNTER, "count", static_cast<double>(total.errors), labels);
  metric("merged", LOUPE_METRIC_COUNTER, "count", static_cast<double>(total.merged), labels);
  metric("merged_bytes", LOUPE_METRIC_COUNTER, "bytes", static_cast<double>(total.merged_bytes),
         labels);
  if (std::uint64_t judged = total.sequential + total.random)
    metric("sequential_share", LOUPE_METRIC_GAUGE, "ratio",
           static_cast<double>(total.sequential) / static_cast<double>(judged), labels);
}

void BiolatReporter::emit_procs() {
  std::vector<bio_proc> per_cpu(static_cast<std::size_t>(ncpus_));
  bio_proc_key key{}, next{};
  bool first = true;
  while (bpf_map_get_next_key(maps_.proc_slots_fd, first ? nullptr : &key, &next) == 0) {
    first = false;
    key = next;
    std::uint32_t slot = 0;
    if (bpf_map_lookup_elem(maps_.proc_slots_fd, &key, &slot) != 0 ||
        bpf_map_lookup_elem(maps_.procs_fd, &slot, per_cpu.data()) != 0)
      continue;
    bio_proc p = merge_per_cpu(std::span<const bio_proc>(per_cpu));
    Labels labels = {{"device", devices_.name(key.dev)},
                     {"dev", dev_string(key.dev)},
                     {"op", op_name(key.op)},
                     {"pid", std::to_string(key.pid)},
                     {"comm", std::string(key.comm, strnlen(key.comm, BIO_COMM_LEN))},
                     {"mechanism", mechanism_}};
    metric("process_requests", LOUPE_METRIC_COUNTER, "count", static_cast<double>(p.count), labels);
    metric("process_bytes", LOUPE_METRIC_COUNTER, "bytes", static_cast<double>(p.bytes), labels);
    metric("process_errors", LOUPE_METRIC_COUNTER, "count", static_cast<double>(p.errors), labels);
    metric("process_merged", LOUPE_METRIC_COUNTER, "count", static_cast<double>(p.merged), labels);
    metric("process_merged_bytes", LOUPE_METRIC_COUNTER, "bytes",
           static_cast<double>(p.merged_bytes), labels);
    if (p.count) {
      metric("process_latency_avg", LOUPE_METRIC_GAUGE, "ns",
             static_cast<double>(p.total_ns) / static_cast<double>(p.count), labels);
      metric("process_latency_max", LOUPE_METRIC_GAUGE, "ns", static_cast<double>(p.max_ns),
             labels);
    }
  }
}

bio_counters BiolatReporter::read_counters() const {
  std::uint32_t zero = 0;
  return sdk::read_per_cpu_sum<bio_counters>(maps_.counters_fd, &zero);
}

std::uint64_t BiolatReporter::count_in_flight() {
  bio_start_key key{}, next{};  // the tp_btf/raw_tp map's keys are its first 8 bytes
  std::uint64_t n = 0;
  bool first = true;
  // ktime of the window's end: a request inserted after the stop was not in flight at it.
  const std::uint64_t stop = is_final_ ? host_.monotonic_at_wall(window_end_) : 0;
  while (bpf_map_get_next_key(maps_.starts_fd, first ? nullptr : &key, &next) == 0) {
    first = false;
    key = next;
    bio_start s{};
    // Markers of filtered-out requests are not the target's requests in flight.
    if (bpf_map_lookup_elem(maps_.starts_fd, &key, &s) != 0 || s.untracked) continue;
    ++n;
    if (is_final_) emit_in_flight(s, stop);
  }
  return n;
}

// A request the session saw start and not end: named at the final report, so a count short
// of what a program did says whose request it was and how far it got.
void BiolatReporter::emit_in_flight(const bio_start& s, std::uint64_t stop) {
  const std::uint64_t since = s.insert_ns ? s.insert_ns : s.issue_ns;
  char comm[BIO_COMM_LEN + 1] = {};
  std::memcpy(comm, s.comm, BIO_COMM_LEN);
  const std::string device = devices_.name(s.dev);
  sdk::RecordBuilder rb(LOUPE_RECORD_EVENT, "request_in_flight");
  rb.label("device", device).label("op", op_name(s.op)).label("mechanism", mechanism_);
  rb.final(true).window(window_start_, window_end_);
  rb.field("device", device)
      .field_u("sector", s.sector)
      .field_u("bytes", s.bytes)
      .field_u("done_bytes", s.done)
      .field("op", std::string(op_name(s.op)))
      .field("issued", static_cast<std::int64_t>(s.issue_ns != 0))
      .field_u("age_ns", stop > since ? stop - since : 0)
      .field("pid", static_cast<std::int64_t>(s.pid))
      .field("tid", static_cast<std::int64_t>(s.tid))
      .field("comm", std::string(comm));
  rb.emit(host_);
}

void BiolatReporter::emit_health(const bio_counters& c, std::uint64_t in_flight) {
  Labels labels = {{"mechanism", mechanism_}};
  metric("completed", LOUPE_METRIC_COUNTER, "count", static_cast<double>(c.completed), labels);
  metric("issued_without_insert", LOUPE_METRIC_COUNTER, "count",
         static_cast<double>(c.issue_no_insert), labels);
  metric("below_min_latency", LOUPE_METRIC_COUNTER, "count", static_cast<double>(c.below_min),
         labels);
  metric("outliers", LOUPE_METRIC_COUNTER, "count", static_cast<double>(c.outliers), labels);
  metric("filtered_out", LOUPE_METRIC_COUNTER, "count", static_cast<double>(c.filtered), labels);
  metric("merged_total", LOUPE_METRIC_COUNTER, "count", static_cast<double>(c.merged), labels);
  metric("in_flight", LOUPE_METRIC_GAUGE, "count", static_cast<double>(in_flight), labels, true);
  auto health = [&](const char* name, std::uint64_t v, loupe_health_severity bad,
                    const std::string& why) {
    sdk::RecordBuilder rb(LOUPE_RECORD_HEALTH, name);
    rb.label("mechanism", mechanism_).final(is_final_).window(window_start_, window_end_);
    rb.health(v ? bad : LOUPE_HEALTH_OK, "biolat", v, v ? why : std::string());
    rb.emit(host_);
  };
  health("unmatched_completions", c.unmatched, LOUPE_HEALTH_OK,
         "completions of requests not tracked: in flight when tracing began, started by a "
         "filtered-out process or device, or (classic tracepoints, keyed by sector) moved");
  health("map_full", c.map_full, LOUPE_HEALTH_WARN,
         "the in-flight map was full: requests not timed (raise max_in_flight)");
  health("requeued", c.requeued, LOUPE_HEALTH_OK,
         "requests issued again after a requeue: their service time restarts");
  health("partial_completions", c.partial, LOUPE_HEALTH_OK,
         "partial completions: the request stays in flight until the rest completes");
  health("stats_full", c.stats_full, LOUPE_HEALTH_WARN,
         "requests of (device, op) pairs beyond max_device_ops: in the per-process rows and "
         "events only, not in the device histograms (raise max_device_ops)");
  health("pattern_full", c.pattern_full, LOUPE_HEALTH_WARN,
         "issues of (device, op) pairs beyond max_device_ops: neither sequential nor random "
         "(raise max_device_ops)");
  if (maps_.proc_slots_fd >= 0)
    health("process_overflow", c.proc_overflow, LOUPE_HEALTH_WARN,
           "per-process limit reached: later processes counted in the device totals only "
           "(raise process_limit)");
  if (c.outliers_sampled_out)
    health("outliers_sampled_out", c.outliers_sampled_out, LOUPE_HEALTH_WARN,
           "slow-request events skipped under ring backpressure (1-in-N sampling)");
  // Completions of untracked requests (other processes', under a pid filter) do not count:
  // what matters is whether anything of the traced target was timed.
  if (is_final_ && c.completed + c.partial + c.issue_no_insert + c.merged == 0)
    health("silent_probe", 1, LOUPE_HEALTH_OK,
           "no block request of the traced processes and devices was timed (no I/O, or all "
           "filtered out)");
}

// Rule queue_share (README): a device whose requests (at least 20) spent at least 20 % of
// their time, first sight to completion, waiting between insert and issue: the queue,
// not the device, is where their time went (a saturated device or a scheduler holding
// requests back).
void BiolatReporter::emit_queue_finding(std::uint32_t dev, const DeviceTime& d) {
  constexpr std::uint64_t kMinRequests = 20;
  constexpr double kMinShare = 0.2;
  if (d.requests < kMinRequests || d.total_ns == 0) return;
  const double share = static_cast<double>(d.queue_ns) / static_cast<double>(d.total_ns);
  if (share < kMinShare) return;
  const std::string name = devices_.name(dev);
  char buf[512];
  std::snprintf(
      buf, sizeof(buf),
      "%s: queue time is %.0f %% of total request time (%s of %s waiting to be issued, "
      "%llu of %llu requests queued)",
      name.c_str(), 100 * share, sdk::human_amount(static_cast<double>(d.queue_ns), "ns").c_str(),
      sdk::human_amount(static_cast<double>(d.total_ns), "ns").c_str(),
      static_cast<unsigned long long>(d.queued), static_cast<unsigned long long>(d.requests));
  sdk::RecordBuilder f(LOUPE_RECORD_FINDING, "queue_share");
  f.label("device", name).label("dev", dev_string(dev)).label("mechanism", mechanism_);
  f.final(true).window(window_start_, window_end_).finding("queue_share", buf, share);
  f.field("device", name).field_u("queue_ns", d.queue_ns).field_u("total_ns", d.total_ns);
  f.field_u("requests", d.requests).field_u("queued", d.queued).field("share", share);
  f.emit(host_);
}

void BiolatReporter::collect(bool is_final, std::uint64_t window_start_ns,
                             std::uint64_t window_end_ns) {
  is_final_ = is_final;
  window_start_ = window_start_ns;
  window_end_ = window_end_ns;
  if (!session_start_) session_start_ = window_start_ns;  // the first window starts the session
  std::vector<bio_stats> per_cpu(static_cast<std::size_t>(ncpus_));
  std::map<std::uint32_t, DeviceTime> device_time;  // all ops of a device, for the findings
  bio_stats_key pair{}, next{};
  bool first = true;
  while (bpf_map_get_next_key(maps_.dev_ops_fd, first ? nullptr : &pair, &next) == 0) {
    first = false;
    pair = next;
    bio_dev_op d_op{};
    if (bpf_map_lookup_elem(maps_.dev_ops_fd, &pair, &d_op) != 0) continue;
    for (std::uint8_t sync = 0; sync < 2; ++sync) {
      const std::uint32_t row = 2 * d_op.slot + sync;
      if (bpf_map_lookup_elem(maps_.stats_fd, &row, per_cpu.data()) != 0) continue;
      const bio_stats total = merge_per_cpu(std::span<const bio_stats>(per_cpu));
      if (total.total.count == 0 && total.merged == 0) continue;  // a row never written
      bio_stats_key key = pair;
      key.sync = sync;
      emit_device(key, total);
      DeviceTime& d = device_time[key.dev];
      d.queue_ns += total.queue.sum;
      d.total_ns += total.total.sum;
      d.requests += total.total.count;
      d.queued += total.queue.count;
    }
  }
  if (is_final_)
    for (const auto& [dev, d] : device_time) emit_queue_finding(dev, d);
  if (maps_.proc_slots_fd >= 0) emit_procs();
  emit_health(read_counters(), count_in_flight());
}

}  // namespace loupe::biolat
