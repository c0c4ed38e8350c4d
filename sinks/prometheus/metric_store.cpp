// SPDX-License-Identifier: Apache-2.0
#include "metric_store.hpp"

#include <algorithm>
#include <cstring>
#include <memory>
#include <string_view>

#include <google/protobuf/io/zero_copy_stream_impl_lite.h>
#include <google/protobuf/util/delimited_message_util.h>

#include "proto/metrics.pb.h"

namespace loupe::sinks {
namespace {

// A record unit as a Prometheus base unit: the name suffix and the factor to apply.
struct Unit {
  std::string suffix;  // "" for plain counts
  // Divided, not multiplied by 1e-9: division by an exact power of ten is correctly
  // rounded, so 300000 ns prints as 0.0003, not 0.00030000000000000003.
  double divisor = 1.0;
  std::string recorded;  // the recorded unit's own suffix, for a native twin when scaled
  ClassicGrid grid{};    // the classic buckets' bounds, in the recorded unit
};

// Drops a trailing "_<unit>" the record name already carries ("wait_ns" in ns): the base
// unit suffix replaces it, and promtool rejects abbreviated units in names.
std::string without_unit(std::string name, const char* unit) {
  if (!unit || !*unit) return name;
  std::string tail = "_" + label_name(unit);
  if (name.size() > tail.size() && name.compare(name.size() - tail.size(), tail.size(), tail) == 0)
    name.resize(name.size() - tail.size());
  return name;
}

Unit base_unit(const char* unit) {
  std::string_view u = unit ? unit : "";
  if (u.empty() || u == "count" || u == "1") return {"", 1.0};
  // Times: 1 us to 68.7 s (27 bounds in ns); below the first bound still counts in it.
  if (u == "ns") return {"seconds", 1e9, "nanoseconds", {10, 36}};
  if (u == "us") return {"seconds", 1e6, "microseconds", {0, 26}};
  if (u == "ms") return {"seconds", 1e3, "milliseconds", {0, 16}};
  if (u == "s" || u == "seconds") return {"seconds", 1.0};
  if (u == "bytes" || u == "byte" || u == "b") return {"bytes", 1.0};
  return {label_name(u), 1.0};
}

std::string with_suffix(std::string name, const std::string& suffix) {
  if (suffix.empty()) return name;
  std::string tail = "_" + suffix;
  if (name.size() >= tail.size() && name.compare(name.size() - tail.size(), tail.size(), tail) == 0)
    return name;
  return name + tail;
}

const char* severity_text(std::uint32_t s) {
  switch (s) {
    case LOUPE_HEALTH_OK: return "ok";
    case LOUPE_HEALTH_WARN: return "warn";
    default: return "error";
  }
}

}  // namespace

Labels MetricStore::labels_of(const loupe_record& rec) const {
  Labels out;
  out.emplace_back("plugin", rec.plugin ? rec.plugin : "");
  for (std::uint32_t i = 0; i < rec.n_labels && rec.labels; ++i) {
    if (!rec.labels[i].key || !rec.labels[i].value) continue;
    std::string key = label_name(rec.labels[i].key);
    // First wins: `plugin` is ours, and two keys may sanitize to the same name.
    if (std::any_of(out.begin(), out.end(), [&](const auto& kv) { return kv.first == key; }))
      continue;
    out.emplace_back(std::move(key), rec.labels[i].value);
  }
  return out;
}

MetricStore::Family* MetricStore::family(const std::string& name, const char* type,
                                         const std::string& help, std::string* why,
                                         bool protobuf_only, const std::string& source) {
  auto [it, inserted] = families_.try_emplace(name);
  if (inserted) {
    it->second.type = type;
    it->second.help = help;
    it->second.source = source;
    it->second.protobuf_only = protobuf_only;
  } else if (it->second.type != type || it->second.protobuf_only != protobuf_only) {
    if (why)
      *why = "metric '" + name + "' is a " + it->second.type +
             (it->second.protobuf_only ? " (native twin)" : "") + ", not a " + type;
    return nullptr;
  } else if (it->second.source != source) {
    // "syscalls_total" beside "syscalls": one family would hold a total and its parts, and
    // sum() over it would count everything twice.
    if (why)
      *why = "metric '" + name + "' already holds record '" + it->second.source + "'; record '" +
             source + "' needs a name of its own";
    return nullptr;
  }
  return &it->second;
}

bool MetricStore::since_start(const loupe_record& rec) const {
  return session_start_ns_ == 0 || rec.window_start_ns <= session_start_ns_;
}

MetricStore::Series MetricStore::histogram_series(const HistogramTotals& t, Labels labels,
                                                  double divisor, bool native, ClassicGrid grid) {
  Series s;
  s.labels = std::move(labels);
  // Buckets hold integers in [lower, upper): one is at or below a bound when upper - 1 is.
  // loupe's layouts (log2, log2-linear) end a bucket at every power of two, so each bound's
  // count is exact; a bucket across a bound (another layout) counts from the next one up.
  std::vector<std::uint64_t> bounds;
  if (grid.lo == 0) bounds.push_back(0);  // a unit that starts at 1 keeps 0 apart
  for (int k = grid.lo; k <= grid.hi; ++k) bounds.push_back(std::uint64_t{1} << k);
  std::size_t next = 0;
  std::uint64_t cumulative = 0;
  for (const std::uint64_t bound : bounds) {
    for (; next < t.buckets.size(); ++next) {
      const loupe_bucket& b = t.buckets[next];
      if (b.upper == UINT64_MAX || b.upper - 1 > bound) break;  // only +Inf bounds an open one
      cumulative += b.count;
    }
    s.classic.emplace_back(static_cast<double>(bound) / divisor, cumulative);
  }
  for (; next < t.buckets.size(); ++next) cumulative += t.buckets[next].count;
  s.count = std::max<std::uint64_t>(t.count, cumulative);
  s.sum = static_cast<double>(t.sum) / divisor;
  if (native)
    s.native = native_schema0(t.buckets.data(), static_cast<std::uint32_t>(t.buckets.size()));
  s.totals = t;
  return s;
}

void MetricStore::feed_histogram(Family& f, const std::string& key, const Labels& labels,
                                 const HistogramTotals& in, bool totals, double divisor,
                                 bool native, ClassicGrid grid) {
  auto it = f.series.find(key);
  HistogramTotals next = in;
  if (it != f.series.end()) {
    const HistogramTotals& had = it->second.totals;
    // Totals below what was served (a producer that lost entries) would read as a reset.
    if (totals && in.count < had.count) return;
    if (!totals) {
      std::map<std::pair<std::uint64_t, std::uint64_t>, std::uint64_t> sum;
      for (const auto* side : {&had.buckets, &in.buckets})
        for (const loupe_bucket& b : *side) sum[{b.lower, b.upper}] += b.count;
      next.buckets.clear();
      for (const auto& [bounds, count] : sum)
        next.buckets.push_back({bounds.first, bounds.second, count});
      next.count = had.count + in.count;
      next.sum = had.sum + in.sum;
    }
  }
  f.series[key] = histogram_series(next, labels, divisor, native, grid);
}

bool MetricStore::update(const loupe_record& rec, std::string* why) {
  if (!rec.name) return false;
  const std::string base = metric_name(prefix_ + rec.name);
  const std::string plugin = rec.plugin ? rec.plugin : "?";
  Labels labels = labels_of(rec);
  std::string ls = label_set(labels);
  std::lock_guard lock(mu_);

  switch (rec.kind) {
    case LOUPE_RECORD_HISTOGRAM: {
      if (!rec.histogram) return false;
      const loupe_histogram& h = *rec.histogram;
      Unit u = base_unit(h.unit);
      std::string name = with_suffix(without_unit(base, h.unit), u.suffix);
      const std::string help = std::string("histogram ") + rec.name + " from loupe plugin " +
                               plugin +
                               (h.unit ? std::string(" (recorded in ") + h.unit + ")" : "");
      Family* f = family(name, "histogram", help, why, false, rec.name);
      if (!f) return false;
      HistogramTotals in;
      for (std::uint32_t i = 0; i < h.n_buckets && h.buckets; ++i)
        if (h.buckets[i].count) in.buckets.push_back(h.buckets[i]);
      in.count = h.count;
      in.sum = h.sum;
      const bool totals = since_start(rec);
      const bool native = native_schema0(h.buckets, h.n_buckets).has_value();
      feed_histogram(*f, ls, labels, in, totals, u.divisor, native && u.divisor == 1.0, u.grid);
      if (native && u.divisor != 1.0) {
        std::string twin = with_suffix(without_unit(base, h.unit), u.recorded);
        Family* t = family(twin, "histogram", help + ", native buckets in " + h.unit, why,
                           /*protobuf_only=*/true, rec.name);
        if (!t) return false;
        feed_histogram(*t, ls, labels, in, totals, 1.0, true, u.grid);
      }
      return true;
    }
    case LOUPE_RECORD_METRIC: {
      if (!rec.metric) return false;
      Unit u = base_unit(rec.metric->unit);
      bool counter = rec.metric->type == LOUPE_METRIC_COUNTER;
      std::string name = with_suffix(without_unit(base, rec.metric->unit), u.suffix);
      if (counter) name = with_suffix(name, "total");
      Family* f = family(
          name, counter ? "counter" : "gauge",
          std::string(counter ? "counter " : "gauge ") + rec.name + " from loupe plugin " + plugin,
          why, false, rec.name);
      if (!f) return false;
      double v = rec.metric->value / u.divisor;
      auto it = f->series.find(ls);
      if (counter && it != f->series.end())
        v = since_start(rec) ? std::max(v, it->second.value) : it->second.value + v;
      f->series[ls] = Series{labels, v, {}, 0, 0, {}, {}};
      return true;
    }
    case LOUPE_RECORD_EVENT: {
      std::string name = with_suffix(base, "events_total");
      Family* f =
          family(name, "counter",
                 std::string("events ") + rec.name + " received from loupe plugin " + plugin, why,
                 false, rec.name);
      if (!f) return false;
      double n = ++event_counts_[name + ls];
      f->series[ls] = Series{labels, n, {}, 0, 0, {}, {}};
      return true;
    }
    case LOUPE_RECORD_HEALTH: {
      if (!rec.health) return false;
      const loupe_health& h = *rec.health;
      Labels hl = labels;
      hl.emplace_back("component", h.component ? h.component : "");
      std::string hls = label_set(hl);
      std::string name = metric_name(prefix_ + "health_" + rec.name);
      Family* f = family(name, "gauge",
                         std::string("loupe health check ") + rec.name +
                             " (the latest value reported; see docs/records.md)",
                         why, false, rec.name);
      if (!f) return false;
      f->series[hls] = Series{hl, static_cast<double>(h.value), {}, 0, 0, {}, {}};
      std::string sev_name = metric_name(prefix_ + "health_severity");
      Family* sev = family(sev_name, "gauge",
                           "severity of each loupe health check: 0 ok, 1 warn (data lost or "
                           "degraded), 2 error (a component failed)",
                           why);
      if (!sev) return false;
      Labels sl = labels;
      sl.emplace_back("check", rec.name);
      sl.emplace_back("component", h.component ? h.component : "");
      sl.emplace_back("severity", severity_text(h.severity));
      // One series per check and component: the severity label says it in words, the
      // value in a form alert rules can compare.
      Labels key = labels;
      key.emplace_back("check", rec.name);
      key.emplace_back("component", h.component ? h.component : "");
      sev->series[label_set(key)] = Series{sl, static_cast<double>(h.severity), {}, 0, 0, {}, {}};
      return true;
    }
    default: return false;  // stacks belong in pprof, folded or html
  }
}

void MetricStore::set_own(const std::string& name, const char* type, const std::string& help,
                          double value) {
  std::lock_guard lock(mu_);
  const std::string full = metric_name(prefix_ + name);
  if (Family* f = family(full, type, help, nullptr, false, "(loupe)"))
    f->series[""] = Series{{}, value, {}, 0, 0, {}, {}};
}

std::string MetricStore::render() const {
  std::lock_guard lock(mu_);
  std::string out;
  for (const auto& [name, f] : families_) {
    if (f.protobuf_only) continue;
    out += "# HELP " + name + ' ' + help_text(f.help) + '\n';
    out += "# TYPE " + name + ' ' + f.type + '\n';
    for (const auto& [key, s] : f.series) {
      const std::string ls = label_set(s.labels);
      if (f.type != "histogram") {
        out += name + ls + ' ' + number(s.value) + '\n';
        continue;
      }
      for (const auto& [le, cumulative] : s.classic) {
        std::pair<std::string, std::string> bound{"le", number(le)};
        out += name + "_bucket" + label_set(s.labels, &bound) + ' ' + std::to_string(cumulative) +
               '\n';
      }
      std::pair<std::string, std::string> inf{"le", "+Inf"};
      out += name + "_bucket" + label_set(s.labels, &inf) + ' ' + std::to_string(s.count) + '\n';
      out += name + "_sum" + ls + ' ' + number(s.sum) + '\n';
      out += name + "_count" + ls + ' ' + std::to_string(s.count) + '\n';
    }
  }
  return out;
}

std::string MetricStore::render_protobuf() const {
  namespace pb = io::prometheus::client;
  std::lock_guard lock(mu_);
  std::string out;
  // The stream trims `out` to what was written only when it goes away.
  auto raw = std::make_unique<google::protobuf::io::StringOutputStream>(&out);
  for (const auto& [name, f] : families_) {
    pb::MetricFamily mf;
    mf.set_name(name);
    mf.set_help(f.help);
    mf.set_type(f.type == "counter" ? pb::COUNTER : f.type == "gauge" ? pb::GAUGE : pb::HISTOGRAM);
    for (const auto& [key, s] : f.series) {
      pb::Metric* m = mf.add_metric();
      for (const auto& [k, v] : s.labels) {
        pb::LabelPair* lp = m->add_label();
        lp->set_name(k);
        lp->set_value(v);
      }
      if (f.type == "counter") {
        m->mutable_counter()->set_value(s.value);
        continue;
      }
      if (f.type == "gauge") {
        m->mutable_gauge()->set_value(s.value);
        continue;
      }
      pb::Histogram* h = m->mutable_histogram();
      h->set_sample_count(s.count);
      h->set_sample_sum(s.sum);
      for (const auto& [le, cumulative] : s.classic) {
        pb::Bucket* b = h->add_bucket();
        b->set_upper_bound(le);
        b->set_cumulative_count(cumulative);
      }
      if (!s.native) continue;
      h->set_schema(0);
      h->set_zero_threshold(0);
      h->set_zero_count(s.native->zero_count);
      for (const auto& span : s.native->spans) {
        pb::BucketSpan* sp = h->add_positive_span();
        sp->set_offset(span.offset);
        sp->set_length(span.length);
      }
      // No observation yet: a no-op span keeps it native, not an empty classic histogram.
      if (s.native->spans.empty()) {
        pb::BucketSpan* sp = h->add_positive_span();
        sp->set_offset(0);
        sp->set_length(0);
      }
      for (std::int64_t d : s.native->deltas) h->add_positive_delta(d);
    }
    google::protobuf::util::SerializeDelimitedToZeroCopyStream(mf, raw.get());
  }
  raw.reset();
  return out;
}

std::size_t MetricStore::families() const {
  std::lock_guard lock(mu_);
  return families_.size();
}

}  // namespace loupe::sinks
