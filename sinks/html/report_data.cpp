// SPDX-License-Identifier: Apache-2.0
#include "report_data.hpp"

#include <cstdio>
#include <string_view>

namespace loupe::sinks {
namespace {

constexpr char kSep = '\x1f';  // cannot appear in a symbol name

std::string frame_name(const loupe_frame& f) {
  std::string out;
  if (f.symbol && *f.symbol) {
    out = f.symbol;
  } else if (f.module && *f.module) {
    std::string_view m(f.module);
    if (auto s = m.rfind('/'); s != std::string_view::npos && s + 1 < m.size())
      m.remove_prefix(s + 1);
    char off[32];
    std::snprintf(off, sizeof(off), "+0x%llx", static_cast<unsigned long long>(f.offset));
    out = std::string(m) + off;
  } else {
    out = "[unknown]";
  }
  for (char& c : out)
    if (c == kSep) c = ' ';
  if (f.kind == LOUPE_FRAME_KERNEL) out += " [k]";
  return out;
}

nlohmann::json labels_json(const loupe_record& rec) {
  nlohmann::json l = nlohmann::json::object();
  for (std::uint32_t i = 0; i < rec.n_labels && rec.labels; ++i)
    if (rec.labels[i].key && rec.labels[i].value) l[rec.labels[i].key] = rec.labels[i].value;
  return l;
}

}  // namespace

void ReportData::add(const loupe_record& rec) {
  if (!rec.name) return;
  if (rec.window_start_ns && (!window_start_ || rec.window_start_ns < window_start_))
    window_start_ = rec.window_start_ns;
  if (rec.window_end_ns > window_end_) window_end_ = rec.window_end_ns;
  const std::string plugin = rec.plugin ? rec.plugin : "";
  if (rec.kind == LOUPE_RECORD_STACK_SAMPLE && rec.stack) {
    const loupe_stack_sample& s = *rec.stack;
    const loupe_value* v = nullptr;
    for (std::uint32_t i = 0; i < s.n_values && s.values; ++i)
      if (value_name_.empty() || (s.values[i].name && value_name_ == s.values[i].name)) {
        v = &s.values[i];
        break;
      }
    if (!v) return;
    Profile& p = profiles_[rec.name];
    if (p.value_name.empty()) {
      p.value_name = v->name ? v->name : "value";
      p.unit = v->unit ? v->unit : "";
    }
    std::string key;
    for (std::uint32_t i = s.n_frames; i-- > 0;) {
      if (!key.empty()) key += kSep;
      key += frame_name(s.frames[i]);
    }
    if (key.empty()) key = "[no stack]";
    p.stacks[key] += v->value;
  } else if (rec.kind == LOUPE_RECORD_HISTOGRAM && rec.histogram) {
    const loupe_histogram& h = *rec.histogram;
    nlohmann::json j{{"name", rec.name},
                     {"plugin", plugin},
                     {"labels", labels_json(rec)},
                     {"unit", h.unit ? h.unit : ""},
                     {"count", h.count},
                     {"sum", h.sum},
                     {"min", h.min},
                     {"max", h.max}};
    j["buckets"] = nlohmann::json::array();
    for (std::uint32_t i = 0; i < h.n_buckets && h.buckets; ++i)
      j["buckets"].push_back({h.buckets[i].lower, h.buckets[i].upper, h.buckets[i].count});
    j["percentiles"] = nlohmann::json::array();
    for (std::uint32_t i = 0; i < h.n_percentiles && h.percentiles; ++i)
      j["percentiles"].push_back({{"q", h.percentiles[i].quantile},
                                  {"value", h.percentiles[i].value},
                                  {"lower", h.percentiles[i].lower},
                                  {"upper", h.percentiles[i].upper}});
    histograms_[std::string(rec.name) + '\n' + j["labels"].dump()] = std::move(j);
  } else if (rec.kind == LOUPE_RECORD_HEALTH && rec.health) {
    const loupe_health& h = *rec.health;
    const char* sev = h.severity == LOUPE_HEALTH_OK     ? "ok"
                      : h.severity == LOUPE_HEALTH_WARN ? "warn"
                                                        : "error";
    std::string comp = h.component ? h.component : "";
    health_[comp + '\n' + rec.name] = {
        {"check", rec.name}, {"component", comp}, {"plugin", plugin},
        {"value", h.value},  {"severity", sev},   {"message", h.message ? h.message : ""}};
  }
}

nlohmann::json ReportData::to_json(const std::string& title) const {
  nlohmann::json j{{"schema", "loupe.report/1"},
                   {"title", title},
                   {"window", {{"start_ns", window_start_}, {"end_ns", window_end_}}}};
  j["profiles"] = nlohmann::json::array();
  for (const auto& [name, p] : profiles_) {
    nlohmann::json stacks = nlohmann::json::array();
    for (const auto& [key, v] : p.stacks) {
      if (v <= 0) continue;
      nlohmann::json frames = nlohmann::json::array();
      std::size_t start = 0;
      while (true) {
        auto end = key.find(kSep, start);
        frames.push_back(
            key.substr(start, end == std::string::npos ? std::string::npos : end - start));
        if (end == std::string::npos) break;
        start = end + 1;
      }
      stacks.push_back({std::move(frames), v});
    }
    j["profiles"].push_back(
        {{"name", name}, {"value", p.value_name}, {"unit", p.unit}, {"stacks", std::move(stacks)}});
  }
  j["histograms"] = nlohmann::json::array();
  for (const auto& [k, h] : histograms_) j["histograms"].push_back(h);
  j["health"] = nlohmann::json::array();
  for (const auto& [k, h] : health_) j["health"].push_back(h);
  return j;
}

}  // namespace loupe::sinks
