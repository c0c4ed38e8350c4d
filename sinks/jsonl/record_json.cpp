// SPDX-License-Identifier: Apache-2.0
#include "record_json.hpp"

#include <string>

namespace loupe::sinks {
namespace {

using Json = nlohmann::ordered_json;

// Unknown enum values keep their number so a newer producer never loses information.
template <std::size_t N>
Json enum_name(std::uint32_t v, const char* const (&names)[N], std::uint32_t first = 0) {
  if (v >= first && v - first < N && names[v - first] != nullptr) return names[v - first];
  return "unknown(" + std::to_string(v) + ")";
}

const char* kKinds[] = {"histogram", "stack", "event", "metric", "health", "finding"};
const char* kSchemes[] = {"log2", "log2_linear", "explicit"};
const char* kFrameKinds[] = {"user", "kernel", "jit", "python", "java", "js"};
const char* kResolved[] = {"symtab",  "dynsym",   "kallsyms", "perf_map",
                           "jitdump", "eh_frame", "python",   "runtime"};
const char* kUnresolved[] = {"no_symbol", "no_module", "process_gone", "not_attempted"};
const char* kMetricTypes[] = {"counter", "gauge"};
const char* kSeverities[] = {"ok", "warn", "error"};

Json str_or_null(const char* s) {
  return s ? Json(s) : Json(nullptr);
}

Json resolution_name(std::uint32_t r) {
  if (r >= LOUPE_UNRESOLVED_NO_SYMBOL) return enum_name(r, kUnresolved, LOUPE_UNRESOLVED_NO_SYMBOL);
  return enum_name(r, kResolved, LOUPE_RESOLVED_SYMTAB);
}

Json frames_json(const loupe_frame* frames, std::uint32_t n) {
  Json out = Json::array();
  for (std::uint32_t i = 0; frames && i < n; ++i) {
    const loupe_frame& f = frames[i];
    Json frame = {{"address", f.address},
                  {"symbol", str_or_null(f.symbol)},
                  {"module", str_or_null(f.module)},
                  {"offset", f.offset},
                  {"kind", enum_name(f.kind, kFrameKinds, LOUPE_FRAME_USER)},
                  {"resolution", resolution_name(f.resolution)}};
    // A Python or Java frame's module and offset are its source file and line: said by
    // name too.
    if (LOUPE_FRAME_IS_SOURCE(f.kind)) {
      frame["file"] = str_or_null(f.module);
      frame["line"] = f.offset;
    }
    out.push_back(std::move(frame));
  }
  return out;
}

Json histogram_json(const loupe_histogram& h) {
  Json buckets = Json::array();
  for (std::uint32_t i = 0; h.buckets && i < h.n_buckets; ++i)
    buckets.push_back({{"lower", h.buckets[i].lower},
                       {"upper", h.buckets[i].upper},
                       {"count", h.buckets[i].count}});
  Json pcts = Json::array();
  for (std::uint32_t i = 0; h.percentiles && i < h.n_percentiles; ++i) {
    const loupe_percentile& p = h.percentiles[i];
    pcts.push_back({{"q", p.quantile}, {"value", p.value}, {"lower", p.lower}, {"upper", p.upper}});
  }
  return {{"unit", str_or_null(h.unit)},
          {"scheme", enum_name(h.scheme, kSchemes, LOUPE_BUCKETS_LOG2)},
          {"sub_buckets", h.sub_buckets},
          {"count", h.count},
          {"sum", h.sum},
          {"min", h.min},
          {"max", h.max},
          {"buckets", std::move(buckets)},
          {"percentiles", std::move(pcts)}};
}

Json stack_json(const loupe_stack_sample& s) {
  Json values = Json::array();
  for (std::uint32_t i = 0; s.values && i < s.n_values; ++i)
    values.push_back({{"name", str_or_null(s.values[i].name)},
                      {"unit", str_or_null(s.values[i].unit)},
                      {"value", s.values[i].value}});
  return {{"frames", frames_json(s.frames, s.n_frames)}, {"values", std::move(values)}};
}

Json field_value(const loupe_field& f) {
  switch (f.type) {
    case LOUPE_FIELD_I64: return f.v.i64;
    case LOUPE_FIELD_U64: return f.v.u64;
    case LOUPE_FIELD_F64: return f.v.f64;
    case LOUPE_FIELD_STR: return str_or_null(f.v.str);
    default: return nullptr;
  }
}

Json fields_json(const loupe_field* fields, std::uint32_t n) {
  Json out = Json::object();
  for (std::uint32_t i = 0; fields && i < n; ++i)
    if (fields[i].key) out[fields[i].key] = field_value(fields[i]);
  return out;
}

Json event_json(const loupe_event& e) {
  return {{"timestamp_ns", e.timestamp_ns},
          {"fields", fields_json(e.fields, e.n_fields)},
          {"frames", frames_json(e.frames, e.n_frames)}};
}

Json metric_json(const loupe_metric& m) {
  return {{"type", enum_name(m.type, kMetricTypes, LOUPE_METRIC_COUNTER)},
          {"unit", str_or_null(m.unit)},
          {"value", m.value}};
}

const char* kEffects[] = {"unsaid", "lost", "degraded"};

Json health_json(const loupe_health& h) {
  Json j = {{"severity", enum_name(h.severity, kSeverities)},
            {"component", str_or_null(h.component)},
            {"value", h.value},
            {"message", str_or_null(h.message)}};
  // ABI 1.11: the share and what the loss did, when the producer says.
  if (LOUPE_ABI_HAS_FIELD(&h, loupe_health, effect)) {
    if (h.whole) {
      j["whole"] = h.whole;
      j["whole_unit"] = str_or_null(h.whole_unit);
    }
    if (h.effect) j["effect"] = enum_name(h.effect, kEffects);
  }
  return j;
}

}  // namespace

Json record_to_json(const loupe_record& rec) {
  Json labels = Json::object();
  for (std::uint32_t i = 0; rec.labels && i < rec.n_labels; ++i)
    if (rec.labels[i].key) labels[rec.labels[i].key] = str_or_null(rec.labels[i].value);

  Json j = {{"schema", kRecordSchema},
            {"kind", enum_name(rec.kind, kKinds, LOUPE_RECORD_HISTOGRAM)},
            {"plugin", str_or_null(rec.plugin)},
            {"name", str_or_null(rec.name)},
            {"labels", std::move(labels)},
            {"is_final", rec.is_final != 0},
            {"window", {{"start_ns", rec.window_start_ns}, {"end_ns", rec.window_end_ns}}}};
  switch (rec.kind) {
    case LOUPE_RECORD_HISTOGRAM:
      if (rec.histogram) j["histogram"] = histogram_json(*rec.histogram);
      break;
    case LOUPE_RECORD_STACK_SAMPLE:
      if (rec.stack) j["stack"] = stack_json(*rec.stack);
      break;
    case LOUPE_RECORD_EVENT:
      if (rec.event) j["event"] = event_json(*rec.event);
      break;
    case LOUPE_RECORD_METRIC:
      if (rec.metric) j["metric"] = metric_json(*rec.metric);
      break;
    case LOUPE_RECORD_HEALTH:
      if (rec.health) j["health"] = health_json(*rec.health);
      break;
    case LOUPE_RECORD_FINDING:
      if (LOUPE_ABI_HAS_FIELD(&rec, loupe_record, finding) && rec.finding)
        j["finding"] = {{"rule", str_or_null(rec.finding->rule)},
                        {"statement", str_or_null(rec.finding->statement)},
                        {"weight", rec.finding->weight},
                        {"evidence", fields_json(rec.finding->evidence, rec.finding->n_evidence)}};
      break;
    default: break;
  }
  return j;
}

std::string record_to_line(const loupe_record& rec) {
  return record_to_json(rec).dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

}  // namespace loupe::sinks
