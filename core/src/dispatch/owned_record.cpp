// SPDX-License-Identifier: Apache-2.0
#include "dispatch/owned_record.hpp"

#include <algorithm>
#include <cmath>
#include <cstring>

namespace loupe {

std::vector<loupe_percentile> compute_percentiles(const loupe_bucket* buckets, std::uint32_t n,
                                                  std::uint64_t min, std::uint64_t max) {
  static constexpr double kQuantiles[] = {0.5, 0.9, 0.95, 0.99, 0.999};
  std::uint64_t total = 0;
  for (std::uint32_t i = 0; i < n; ++i) total += buckets[i].count;
  std::vector<loupe_percentile> out;
  if (total == 0) return out;
  for (double q : kQuantiles) {
    auto rank = static_cast<std::uint64_t>(std::ceil(q * static_cast<double>(total)));
    rank = std::clamp<std::uint64_t>(rank, 1, total);
    std::uint64_t cum = 0;
    for (std::uint32_t i = 0; i < n; ++i) {
      const loupe_bucket& b = buckets[i];
      if (b.count == 0 || cum + b.count < rank) {
        cum += b.count;
        continue;
      }
      double frac = static_cast<double>(rank - cum) / static_cast<double>(b.count);
      // Buckets come from plugins: an inverted one has no width, and one near 2^64 can
      // interpolate past the largest uint64 (converting that double is undefined).
      double width = b.upper > b.lower ? static_cast<double>(b.upper - b.lower) : 0.0;
      double estimate = static_cast<double>(b.lower) + frac * width;
      std::uint64_t value = estimate >= 0x1p64 ? UINT64_MAX : static_cast<std::uint64_t>(estimate);
      std::uint64_t lo = b.lower, hi = b.upper;
      if (max >= min && max > 0) {
        value = std::clamp(value, min, max);
        lo = std::max(lo, min);
        hi = std::min(hi, max == UINT64_MAX ? max : max + 1);
      }
      if (hi <= lo) hi = lo == UINT64_MAX ? lo : lo + 1;
      value = std::clamp(value, lo, hi == lo ? hi : hi - 1);  // inside [lower, upper)
      out.push_back({q, value, lo, hi});
      break;
    }
  }
  return out;
}

std::string check_record(const loupe_record& rec) {
  if (rec.size < offsetof(loupe_record, health) + sizeof(void*)) return "record table truncated";
  if (rec.name == nullptr || *rec.name == '\0') return "record has no name";
  if (rec.n_labels && !rec.labels) return "record declares labels but the array is NULL";
  for (std::uint32_t i = 0; i < rec.n_labels; ++i)
    if (!rec.labels[i].key || !rec.labels[i].value) return "record label with NULL key or value";
  switch (rec.kind) {
    case LOUPE_RECORD_HISTOGRAM:
      if (!rec.histogram) return "histogram record without histogram payload";
      if (rec.histogram->n_buckets && !rec.histogram->buckets)
        return "histogram declares buckets but the array is NULL";
      return {};
    case LOUPE_RECORD_STACK_SAMPLE:
      if (!rec.stack) return "stack record without stack payload";
      if ((rec.stack->n_frames && !rec.stack->frames) ||
          (rec.stack->n_values && !rec.stack->values))
        return "stack record with NULL frames/values";
      return {};
    case LOUPE_RECORD_EVENT:
      if (!rec.event) return "event record without event payload";
      if ((rec.event->n_fields && !rec.event->fields) ||
          (rec.event->n_frames && !rec.event->frames))
        return "event record with NULL fields/frames";
      for (std::uint32_t i = 0; i < rec.event->n_fields; ++i)
        if (!rec.event->fields[i].key) return "event field without a key";
      return {};
    case LOUPE_RECORD_METRIC:
      return rec.metric ? std::string() : "metric record without metric payload";
    case LOUPE_RECORD_HEALTH:
      return rec.health ? std::string() : "health record without health payload";
    case LOUPE_RECORD_FINDING: {
      if (!LOUPE_ABI_HAS_FIELD(&rec, loupe_record, finding) || !rec.finding)
        return "finding record without finding payload";
      const loupe_finding& f = *rec.finding;
      if (!f.rule || !*f.rule || !f.statement || !*f.statement)
        return "finding without a rule or a statement";
      if (f.n_evidence && !f.evidence) return "finding declares evidence but the array is NULL";
      for (std::uint32_t i = 0; i < f.n_evidence; ++i)
        if (!f.evidence[i].key) return "finding evidence without a key";
      return {};
    }
    default: return "unknown record kind " + std::to_string(rec.kind);
  }
}

const char* OwnedRecord::keep(const char* s) {
  if (s == nullptr) return nullptr;
  return strings_.emplace_back(s).c_str();
}

void OwnedRecord::copy_frames(const loupe_frame* frames, std::uint32_t n) {
  frames_.reserve(n);
  for (std::uint32_t i = 0; i < n; ++i) {
    loupe_frame f = frames[i];
    f.symbol = keep(f.symbol);
    f.module = keep(f.module);
    frames_.push_back(f);
  }
}

void OwnedRecord::copy_fields(const loupe_field* fields, std::uint32_t n) {
  fields_.reserve(n);
  for (std::uint32_t i = 0; i < n; ++i) {
    loupe_field f = fields[i];
    f.key = keep(f.key);
    if (f.type == LOUPE_FIELD_STR) f.v.str = keep(f.v.str ? f.v.str : "");
    fields_.push_back(f);
  }
}

OwnedRecord::OwnedRecord(const loupe_record& src, const std::string& plugin,
                         std::uint64_t window_start_ns, std::uint64_t window_end_ns) {
  rec_.size = sizeof(rec_);
  rec_.kind = src.kind;
  rec_.plugin = keep(plugin.c_str());
  rec_.name = keep(src.name);
  rec_.is_final = src.is_final;
  rec_.window_start_ns = src.window_start_ns ? src.window_start_ns : window_start_ns;
  rec_.window_end_ns = src.window_end_ns ? src.window_end_ns : window_end_ns;
  labels_.reserve(src.n_labels);
  for (std::uint32_t i = 0; i < src.n_labels; ++i)
    labels_.push_back({keep(src.labels[i].key), keep(src.labels[i].value)});
  rec_.labels = labels_.data();
  rec_.n_labels = src.n_labels;

  switch (src.kind) {
    case LOUPE_RECORD_HISTOGRAM: {
      const loupe_histogram& h = *src.histogram;
      buckets_.assign(h.buckets, h.buckets + h.n_buckets);
      std::sort(buckets_.begin(), buckets_.end(),
                [](const auto& a, const auto& b) { return a.lower < b.lower; });
      hist_ = h;
      hist_.size = sizeof(hist_);
      hist_.unit = keep(h.unit ? h.unit : "");
      hist_.buckets = buckets_.data();
      percentiles_ = compute_percentiles(buckets_.data(), h.n_buckets, h.min, h.max);
      hist_.percentiles = percentiles_.data();
      hist_.n_percentiles = static_cast<std::uint32_t>(percentiles_.size());
      rec_.histogram = &hist_;
      break;
    }
    case LOUPE_RECORD_STACK_SAMPLE: {
      const loupe_stack_sample& s = *src.stack;
      copy_frames(s.frames, s.n_frames);
      for (std::uint32_t i = 0; i < s.n_values; ++i)
        values_.push_back({keep(s.values[i].name), keep(s.values[i].unit), s.values[i].value});
      stack_ = {sizeof(stack_), s.n_frames, frames_.data(), values_.data(), s.n_values};
      rec_.stack = &stack_;
      break;
    }
    case LOUPE_RECORD_EVENT: {
      const loupe_event& e = *src.event;
      copy_fields(e.fields, e.n_fields);
      copy_frames(e.frames, e.n_frames);
      event_ = {sizeof(event_), e.n_fields,     e.timestamp_ns,
                fields_.data(), frames_.data(), e.n_frames};
      rec_.event = &event_;
      break;
    }
    case LOUPE_RECORD_METRIC:
      metric_ = *src.metric;
      metric_.size = sizeof(metric_);
      metric_.unit = keep(metric_.unit ? metric_.unit : "");
      rec_.metric = &metric_;
      break;
    case LOUPE_RECORD_HEALTH:
      // A producer of an older ABI passes a shorter table: only its own fields are read.
      health_ = loupe_health{};
      std::memcpy(&health_, src.health,
                  std::min<std::size_t>(sizeof(health_),
                                        src.health->size ? src.health->size : sizeof(health_)));
      health_.size = sizeof(health_);
      health_.component = keep(health_.component ? health_.component : "");
      health_.message = keep(health_.message);
      health_.whole_unit = keep(health_.whole_unit);
      rec_.health = &health_;
      break;
    case LOUPE_RECORD_FINDING: {
      const loupe_finding& f = *src.finding;
      copy_fields(f.evidence, f.n_evidence);
      finding_ = {sizeof(finding_),  f.n_evidence,   keep(f.rule),
                  keep(f.statement), fields_.data(), f.weight};
      rec_.finding = &finding_;
      break;
    }
  }
}

}  // namespace loupe
