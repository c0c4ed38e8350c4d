// SPDX-License-Identifier: Apache-2.0
//
// Builders for loupe_record. They own the strings and arrays a record points into, so a
// plugin can fill one, call emit(), and let it go out of scope (the host deep-copies).
#ifndef LOUPE_SDK_RECORDS_HPP
#define LOUPE_SDK_RECORDS_HPP

#include <cstdint>
#include <deque>
#include <string>
#include <utility>
#include <vector>

#include "loupe/abi/records.h"
#include "loupe/sdk/hist_slots.hpp"
#include "loupe/sdk/host.hpp"

namespace loupe::sdk {

class RecordBuilder {
 public:
  RecordBuilder(loupe_record_kind kind, std::string name) : name_(std::move(name)) {
    rec_.size = sizeof(rec_);
    rec_.kind = kind;
  }

  RecordBuilder& label(std::string key, std::string value) {
    labels_.emplace_back(std::move(key), std::move(value));
    return *this;
  }
  RecordBuilder& final(bool f) {
    rec_.is_final = f ? 1 : 0;
    return *this;
  }
  RecordBuilder& window(std::uint64_t start_ns, std::uint64_t end_ns) {
    rec_.window_start_ns = start_ns;
    rec_.window_end_ns = end_ns;
    return *this;
  }

  // Log2 slots as loupe_log2_slot() keeps them (slot 0 = {0}, slot i = (2^(i-2), 2^(i-1)]);
  // the last of `slots` holds the rest.
  RecordBuilder& log2_histogram(const char* unit, const std::vector<std::uint64_t>& slots,
                                std::uint64_t count, std::uint64_t sum, std::uint64_t min,
                                std::uint64_t max) {
    buckets_.clear();
    for (std::size_t i = 0; i < slots.size(); ++i) {
      if (slots[i] == 0) continue;
      SlotBounds b =
          log2_slot_bounds(static_cast<std::uint32_t>(i), static_cast<std::uint32_t>(slots.size()));
      buckets_.push_back({b.lower, b.upper, slots[i]});
    }
    fill_hist(LOUPE_BUCKETS_LOG2, 0, unit, count, sum, min, max);
    return *this;
  }
  RecordBuilder& histogram(loupe_bucket_scheme scheme, std::uint32_t sub_buckets, const char* unit,
                           std::vector<loupe_bucket> buckets, std::uint64_t count,
                           std::uint64_t sum, std::uint64_t min, std::uint64_t max) {
    buckets_ = std::move(buckets);
    fill_hist(scheme, sub_buckets, unit, count, sum, min, max);
    return *this;
  }

  RecordBuilder& metric(loupe_metric_type type, const char* unit, double value) {
    metric_ = {sizeof(metric_), static_cast<std::uint32_t>(type), intern(unit), value};
    return *this;
  }
  RecordBuilder& health(loupe_health_severity sev, std::string component, std::uint64_t value,
                        std::string message = {}) {
    health_ = {sizeof(health_),
               static_cast<std::uint32_t>(sev),
               intern(component),
               value,
               message.empty() ? nullptr : intern(message),
               0,
               nullptr,
               0,
               0};
    return *this;
  }
  // After health(): what its value is a part of ("3 of 196 stacks") and what it did to the
  // data (LOUPE_HEALTH_EFFECT_LOST or _DEGRADED), so a report gives a share, not a count.
  RecordBuilder& of(std::uint64_t whole, const char* whole_unit, loupe_health_effect effect) {
    health_.whole = whole;
    health_.whole_unit = whole_unit ? intern(whole_unit) : nullptr;
    health_.effect = static_cast<std::uint32_t>(effect);
    return *this;
  }

  // A finding (ABI 1.4): the rule's id, its sentence with the figures in it, and the share
  // of its whole it concerns (0..1; orders findings). The figures again go in field()s:
  // the evidence a program can check. Build it as RecordBuilder(LOUPE_RECORD_FINDING,
  // rule) with final(true): findings judge a whole session.
  RecordBuilder& finding(std::string rule, std::string statement, double weight) {
    finding_ = {};
    finding_.rule = intern(rule);
    finding_.statement = intern(statement);
    finding_.weight = weight;
    return *this;
  }

  // Event fields (and a finding's evidence); timestamp in CLOCK_REALTIME ns.
  RecordBuilder& event_time(std::uint64_t wall_ns) {
    event_.timestamp_ns = wall_ns;
    return *this;
  }
  RecordBuilder& field(std::string key, std::int64_t v) {
    loupe_field f{};
    f.key = intern(key);
    f.type = LOUPE_FIELD_I64;
    f.v.i64 = v;
    fields_.push_back(f);
    return *this;
  }
  RecordBuilder& field_u(std::string key, std::uint64_t v) {
    loupe_field f{};
    f.key = intern(key);
    f.type = LOUPE_FIELD_U64;
    f.v.u64 = v;
    fields_.push_back(f);
    return *this;
  }
  RecordBuilder& field(std::string key, double v) {
    loupe_field f{};
    f.key = intern(key);
    f.type = LOUPE_FIELD_F64;
    f.v.f64 = v;
    fields_.push_back(f);
    return *this;
  }
  RecordBuilder& field(std::string key, std::string v) {
    loupe_field f{};
    f.key = intern(key);
    f.type = LOUPE_FIELD_STR;
    f.v.str = intern(v);
    fields_.push_back(f);
    return *this;
  }
  // Frames are borrowed: they must outlive emit() (e.g. from Host::symbolize).
  RecordBuilder& frames(const loupe_frame* frames, std::uint32_t n) {
    frames_ = frames;
    n_frames_ = n;
    return *this;
  }
  RecordBuilder& value(std::string name, std::string unit, std::int64_t v) {
    values_.push_back({intern(name), intern(unit), v});
    return *this;
  }

  const loupe_record& build() {
    label_views_.clear();
    for (auto& [k, v] : labels_) label_views_.push_back({k.c_str(), v.c_str()});
    rec_.name = name_.c_str();
    rec_.labels = label_views_.data();
    rec_.n_labels = static_cast<std::uint32_t>(label_views_.size());
    rec_.histogram = nullptr;
    rec_.stack = nullptr;
    rec_.event = nullptr;
    rec_.metric = nullptr;
    rec_.health = nullptr;
    rec_.finding = nullptr;
    switch (rec_.kind) {
      case LOUPE_RECORD_HISTOGRAM:
        hist_.buckets = buckets_.data();
        hist_.n_buckets = static_cast<std::uint32_t>(buckets_.size());
        rec_.histogram = &hist_;
        break;
      case LOUPE_RECORD_STACK_SAMPLE:
        stack_ = {sizeof(stack_), n_frames_, frames_, values_.data(),
                  static_cast<std::uint32_t>(values_.size())};
        rec_.stack = &stack_;
        break;
      case LOUPE_RECORD_EVENT:
        event_.size = sizeof(event_);
        event_.fields = fields_.data();
        event_.n_fields = static_cast<std::uint32_t>(fields_.size());
        event_.frames = frames_;
        event_.n_frames = n_frames_;
        rec_.event = &event_;
        break;
      case LOUPE_RECORD_METRIC: rec_.metric = &metric_; break;
      case LOUPE_RECORD_HEALTH: rec_.health = &health_; break;
      case LOUPE_RECORD_FINDING:
        finding_.size = sizeof(finding_);
        finding_.evidence = fields_.data();
        finding_.n_evidence = static_cast<std::uint32_t>(fields_.size());
        rec_.finding = &finding_;
        break;
    }
    return rec_;
  }

  int emit(const Host& host) { return host.emit(build()); }

 private:
  const char* intern(const std::string& s) { return strings_.emplace_back(s).c_str(); }
  void fill_hist(loupe_bucket_scheme scheme, std::uint32_t sub, const char* unit,
                 std::uint64_t count, std::uint64_t sum, std::uint64_t min, std::uint64_t max) {
    hist_ = {};
    hist_.size = sizeof(hist_);
    hist_.scheme = scheme;
    hist_.sub_buckets = sub;
    hist_.unit = intern(unit);
    hist_.count = count;
    hist_.sum = sum;
    hist_.min = min;
    hist_.max = max;
  }

  std::string name_;
  loupe_record rec_{};
  std::vector<std::pair<std::string, std::string>> labels_;
  std::vector<loupe_label> label_views_;
  std::deque<std::string> strings_;  // deque: interned pointers stay valid as it grows
  std::vector<loupe_bucket> buckets_;
  loupe_histogram hist_{};
  loupe_metric metric_{};
  loupe_health health_{};
  loupe_finding finding_{};
  loupe_event event_{};
  loupe_stack_sample stack_{};
  std::vector<loupe_field> fields_;
  std::vector<loupe_value> values_;
  const loupe_frame* frames_ = nullptr;
  std::uint32_t n_frames_ = 0;
};

// A loss counter and what it means, for emit_health_rows().
struct HealthRow {
  const char* component;  // "plugin/what", e.g. "offcpu/keys_full"
  std::uint64_t value;
  const char* message;  // why it matters and what to raise; shown when value != 0
  // What `value` is a part of and what it did (RecordBuilder::of); whole 0: no share.
  std::uint64_t whole = 0;
  const char* whole_unit = nullptr;
  loupe_health_effect effect = LOUPE_HEALTH_EFFECT_UNSAID;
};

// One HEALTH record `name` per row: WARN with its message when the counter is not zero,
// OK otherwise (so a report shows every place that could lose data, and that it did not).
template <typename Rows>
void emit_health_rows(const Host& host, const char* name, const Rows& rows, bool is_final,
                      std::uint64_t window_start_ns, std::uint64_t window_end_ns) {
  for (const HealthRow& r : rows) {
    RecordBuilder rb(LOUPE_RECORD_HEALTH, name);
    rb.final(is_final).window(window_start_ns, window_end_ns);
    rb.health(r.value ? LOUPE_HEALTH_WARN : LOUPE_HEALTH_OK, r.component, r.value, r.message);
    rb.of(r.whole, r.whole_unit, r.effect);
    rb.emit(host);
  }
}

}  // namespace loupe::sdk

#endif  // LOUPE_SDK_RECORDS_HPP
