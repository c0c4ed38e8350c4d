// SPDX-License-Identifier: Apache-2.0
#include "report_batch.hpp"

#include <algorithm>
#include <string_view>

namespace loupe::sinks {
namespace {

bool ends_with(std::string_view s, std::string_view suffix) {
  return s.size() >= suffix.size() && s.substr(s.size() - suffix.size()) == suffix;
}
bool starts_with(std::string_view s, std::string_view prefix) {
  return s.substr(0, prefix.size()) == prefix;
}

std::optional<double> numeric(const FieldValue& v) {
  if (auto p = std::get_if<std::int64_t>(&v)) return static_cast<double>(*p);
  if (auto p = std::get_if<std::uint64_t>(&v)) return static_cast<double>(*p);
  if (auto p = std::get_if<double>(&v)) return *p;
  return std::nullopt;
}

std::string unit_of_key(std::string_view key) {
  for (const char* u : {"ns", "us", "ms", "bytes"})
    if (ends_with(key, std::string("_") + u)) return u;
  return {};
}

bool is_point_in_time(std::string_view key) {
  return starts_with(key, "ts") || starts_with(key, "timestamp") || starts_with(key, "start") ||
         starts_with(key, "end") || starts_with(key, "time");
}

}  // namespace

std::optional<EventMagnitude> event_magnitude(const EventCopy& e) {
  static constexpr std::string_view kPreferred[] = {
      "duration_ns", "latency_ns", "delta_ns", "elapsed_ns", "wait_ns", "duration", "latency"};
  for (std::string_view want : kPreferred)
    for (const auto& [key, v] : e.fields)
      if (key == want)
        if (auto d = numeric(v)) return EventMagnitude{key, *d, unit_of_key(key)};
  for (const auto& [key, v] : e.fields)
    if (ends_with(key, "_ns") && !is_point_in_time(key))
      if (auto d = numeric(v)) return EventMagnitude{key, *d, "ns"};
  return std::nullopt;
}

std::vector<RankedEvent> EventLog::latest_ordered() const {
  std::vector<RankedEvent> out;
  out.reserve(latest.size());
  for (std::size_t i = 0; i < latest.size(); ++i)
    out.push_back(latest[(latest_next + i) % latest.size()]);
  return out;
}

void ReportBatch::add(const loupe_record& rec) {
  ++n_records_;
  std::string name = copy_str(rec.name);
  Labels labels = copy_labels(rec);
  window_end_ns = std::max(window_end_ns, rec.window_end_ns);

  if (rec.kind == LOUPE_RECORD_HEALTH) {
    if (!rec.health) return;
    HealthCopy h = copy_health(*rec.health);
    std::string key = h.component + '\x1f' + name + '\x1f' + labels_text(labels);
    health[key] = HealthEntry{name, std::move(labels), std::move(h)};
    return;
  }
  std::string producer = rec.plugin ? rec.plugin : "";
  auto [it, added] = producers.try_emplace(producer);
  if (added) arrival.push_back(producer);
  ProducerRecords& p = it->second;
  auto note_name = [&p](const std::string& n) {
    if (std::find(p.order.begin(), p.order.end(), n) == p.order.end()) p.order.push_back(n);
  };

  switch (rec.kind) {
    case LOUPE_RECORD_HISTOGRAM:
      if (rec.histogram) {
        note_name(name);
        std::string key = series_name(name, labels);
        p.histograms[key] = HistogramSeries{name, std::move(labels), copy_histogram(*rec.histogram),
                                            since_start(rec)};
      }
      break;
    case LOUPE_RECORD_METRIC:
      if (rec.metric) {
        note_name(name);
        std::string key = labels_text(labels);
        p.metrics[name][key] = MetricSeries{
            std::move(labels),
            MetricCopy{rec.metric->type, copy_str(rec.metric->unit), rec.metric->value},
            since_start(rec)};
      }
      break;
    case LOUPE_RECORD_STACK_SAMPLE:
      if (rec.stack) add_stack(p, name, std::move(labels), *rec.stack, since_start(rec));
      break;
    case LOUPE_RECORD_EVENT:
      if (rec.event) {
        EventLog& log = p.events[name];
        log.any_final = log.any_final || rec.is_final;
        log.add(RankedEvent{std::move(labels), copy_event(*rec.event), std::nullopt}, keep_events_);
      }
      break;
    case LOUPE_RECORD_FINDING:
      if (LOUPE_ABI_HAS_FIELD(&rec, loupe_record, finding) && rec.finding &&
          rec.finding->statement) {
        std::string rule = copy_str(rec.finding->rule);
        std::replace(rule.begin(), rule.end(), '_', ' ');
        p.findings.emplace_back(rec.finding->weight, rule + ": " + rec.finding->statement);
      }
      break;
    default: break;
  }
}

void ReportBatch::add_stack(ProducerRecords& p, const std::string& name, Labels labels,
                            const loupe_stack_sample& s, bool since_start) {
  std::vector<FrameCopy> frames = copy_frames(s.frames, s.n_frames);
  // Rows are the stacks as the report names them: two samples at different addresses of
  // one function are one row, as in the folded output (keyed by addresses, a hot function
  // was spread over rows that looked the same and could fall out of the top list).
  std::string key = labels_text(labels);
  for (const auto& f : frames) key += '\x1f' + frame_text(f);
  if (std::find(p.stack_order.begin(), p.stack_order.end(), name) == p.stack_order.end())
    p.stack_order.push_back(name);
  StackEntry& entry = p.stacks[name][key];
  entry.since_start = entry.since_start || since_start;
  if (entry.frames.empty() && entry.values.empty()) {
    entry.labels = std::move(labels);
    entry.frames = std::move(frames);
  }
  for (std::uint32_t i = 0; s.values && i < s.n_values; ++i) {
    std::string vname = copy_str(s.values[i].name);
    auto it = std::find_if(entry.values.begin(), entry.values.end(),
                           [&](const ValueCopy& v) { return v.name == vname; });
    if (it == entry.values.end())
      entry.values.push_back({vname, copy_str(s.values[i].unit), s.values[i].value});
    else
      it->value += s.values[i].value;
  }
}

void EventLog::add(RankedEvent ranked, std::size_t keep) {
  ++count;
  if (keep == 0) return;
  ranked.magnitude = event_magnitude(ranked.event);

  if (ranked.magnitude) {
    auto slower = [](const RankedEvent& a, const RankedEvent& b) {
      return a.magnitude->value > b.magnitude->value;
    };
    if (slowest.size() < keep || ranked.magnitude->value > slowest.back().magnitude->value) {
      auto pos = std::upper_bound(slowest.begin(), slowest.end(), ranked, slower);
      slowest.insert(pos, ranked);
      if (slowest.size() > keep) slowest.pop_back();
    }
  }
  if (latest.size() < keep) {
    latest.push_back(std::move(ranked));
  } else {
    latest[latest_next] = std::move(ranked);
    latest_next = (latest_next + 1) % keep;
  }
}

}  // namespace loupe::sinks
