// SPDX-License-Identifier: Apache-2.0
#include "metric_store.hpp"

#include <algorithm>
#include <cstring>
#include <string_view>

namespace loupe::sinks {
namespace {

// A record unit as a Prometheus base unit: the name suffix and the factor to apply.
struct Unit {
  std::string suffix;  // "" for plain counts
  // Divided, not multiplied by 1e-9: division by an exact power of ten is correctly
  // rounded, so 300000 ns prints as 0.0003, not 0.00030000000000000003.
  double divisor = 1.0;
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
  if (u == "ns") return {"seconds", 1e9};
  if (u == "us") return {"seconds", 1e6};
  if (u == "ms") return {"seconds", 1e3};
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
                                         const std::string& help, std::string* why) {
  auto [it, inserted] = families_.try_emplace(name);
  if (inserted) {
    it->second.type = type;
    it->second.help = help;
  } else if (it->second.type != type) {
    if (why) *why = "metric '" + name + "' is a " + it->second.type + ", not a " + type;
    return nullptr;
  }
  return &it->second;
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
      Family* f = family(name, "histogram",
                         std::string("histogram ") + rec.name + " from loupe plugin " + plugin +
                             (h.unit ? std::string(" (recorded in ") + h.unit + ")" : ""),
                         why);
      if (!f) return false;
      std::string lines;
      std::uint64_t cumulative = 0;
      for (std::uint32_t i = 0; i < h.n_buckets && h.buckets; ++i) {
        cumulative += h.buckets[i].count;
        if (h.buckets[i].upper == UINT64_MAX) continue;  // only +Inf bounds it
        // Buckets hold integers in [lower, upper): the largest value inside is upper - 1,
        // so `le` is exact rather than off by one bucket edge.
        std::pair<std::string, std::string> le{
            "le", number(static_cast<double>(h.buckets[i].upper - 1) / u.divisor)};
        lines +=
            name + "_bucket" + label_set(labels, &le) + ' ' + std::to_string(cumulative) + '\n';
      }
      std::uint64_t count = std::max<std::uint64_t>(h.count, cumulative);
      std::pair<std::string, std::string> inf{"le", "+Inf"};
      lines += name + "_bucket" + label_set(labels, &inf) + ' ' + std::to_string(count) + '\n';
      lines += name + "_sum" + ls + ' ' + number(static_cast<double>(h.sum) / u.divisor) + '\n';
      lines += name + "_count" + ls + ' ' + std::to_string(count) + '\n';
      f->series[ls] = std::move(lines);
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
          why);
      if (!f) return false;
      f->series[ls] = name + ls + ' ' + number(rec.metric->value / u.divisor) + '\n';
      return true;
    }
    case LOUPE_RECORD_EVENT: {
      std::string name = with_suffix(base, "events_total");
      Family* f =
          family(name, "counter",
                 std::string("events ") + rec.name + " received from loupe plugin " + plugin, why);
      if (!f) return false;
      double n = ++event_counts_[name + ls];
      f->series[ls] = name + ls + ' ' + number(n) + '\n';
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
                         why);
      if (!f) return false;
      f->series[hls] = name + hls + ' ' + number(static_cast<double>(h.value)) + '\n';
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
      sev->series[label_set(key)] =
          sev_name + label_set(sl) + ' ' + std::to_string(h.severity) + '\n';
      return true;
    }
    default: return false;  // stacks belong in pprof, folded or html
  }
}

std::string MetricStore::render() const {
  std::lock_guard lock(mu_);
  std::string out;
  for (const auto& [name, f] : families_) {
    out += "# HELP " + name + ' ' + help_text(f.help) + '\n';
    out += "# TYPE " + name + ' ' + f.type + '\n';
    for (const auto& [labels, lines] : f.series) out += lines;
  }
  return out;
}

std::size_t MetricStore::families() const {
  std::lock_guard lock(mu_);
  return families_.size();
}

}  // namespace loupe::sinks
