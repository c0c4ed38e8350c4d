// SPDX-License-Identifier: Apache-2.0
#include "report_data.hpp"

#include <algorithm>

#include "loupe/report/frame_name.hpp"

namespace loupe::sinks {
namespace {

constexpr char kSep = '\x1f';  // cannot appear in a symbol name

std::string frame_name(const loupe_frame& f) {
  std::string out = report::frame_name(f);
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
  findings_.add(rec);
  if (rec.kind == LOUPE_RECORD_STACK_SAMPLE && rec.stack) {
    const loupe_stack_sample& s = *rec.stack;
    const loupe_value* v = nullptr;
    for (std::uint32_t i = 0; i < s.n_values && s.values; ++i)
      if (value_name_.empty() || (s.values[i].name && value_name_ == s.values[i].name)) {
        v = &s.values[i];
        break;
      }
    if (!v) return;
    Profile& p = profiles_[{plugin, rec.name}];
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
    nlohmann::json row = {{"check", rec.name}, {"component", comp},
                          {"plugin", plugin},  {"value", h.value},
                          {"severity", sev},   {"message", h.message ? h.message : ""}};
    // ABI 1.11: what the value is a part of, and whether the data is missing or blurred.
    if (LOUPE_ABI_HAS_FIELD(&h, loupe_health, effect)) {
      if (h.whole) {
        row["whole"] = h.whole;
        row["whole_unit"] = h.whole_unit ? h.whole_unit : "";
      }
      if (h.effect == LOUPE_HEALTH_EFFECT_LOST) row["effect"] = "lost";
      if (h.effect == LOUPE_HEALTH_EFFECT_DEGRADED) row["effect"] = "degraded";
    }
    health_[comp + '\n' + rec.name] = std::move(row);
  }
}

nlohmann::json ReportData::to_json(const std::string& title,
                                   const std::vector<std::string>& profilers,
                                   const ReportData* base, const std::string& base_label) const {
  nlohmann::json j{{"schema", "loupe.report/2"},
                   {"title", title},
                   {"window", {{"start_ns", window_start_}, {"end_ns", window_end_}}},
                   {"profilers", profilers},
                   {"findings", findings_.statements()},
                   {"base", base ? base_label : ""}};
  auto frames_of = [](const std::string& key) {
    nlohmann::json frames = nlohmann::json::array();
    for (std::size_t start = 0;;) {
      auto end = key.find(kSep, start);
      frames.push_back(
          key.substr(start, end == std::string::npos ? std::string::npos : end - start));
      if (end == std::string::npos) break;
      start = end + 1;
    }
    return frames;
  };
  j["profiles"] = nlohmann::json::array();
  for (const auto& [id, p] : profiles_) {
    const Profile* bp = nullptr;
    if (base)
      if (auto it = base->profiles_.find(id); it != base->profiles_.end()) bp = &it->second;
    nlohmann::json stacks = nlohmann::json::array();
    std::int64_t base_total = 0;
    if (bp)
      for (const auto& [key, v] : bp->stacks) base_total += std::max<std::int64_t>(v, 0);
    for (const auto& [key, v] : p.stacks) {
      if (v <= 0) continue;
      nlohmann::json s{frames_of(key), v};
      if (base) {
        std::int64_t b = 0;
        if (bp)
          if (auto it = bp->stacks.find(key); it != bp->stacks.end()) b = it->second;
        s.push_back(b);
      }
      stacks.push_back(std::move(s));
    }
    nlohmann::json prof{{"plugin", id.first},
                        {"name", id.second},
                        {"value", p.value_name},
                        {"unit", p.unit},
                        {"stacks", std::move(stacks)}};
    // Stacks only in the base have no width in the new run's graph, but their weight is
    // part of the base's total the shares are taken of.
    if (base) prof["base_total"] = base_total;
    // The flat view the console opens with, by the same rule (the program's own frames):
    // [function, self share, total share], heaviest by self first.
    nlohmann::json functions = nlohmann::json::array();
    for (const auto& f :
         findings_.functions((id.first.empty() ? "?" : id.first) + "/" + id.second, 10))
      functions.push_back({f.function, f.self, f.total});
    prof["functions"] = std::move(functions);
    j["profiles"].push_back(std::move(prof));
  }
  j["histograms"] = nlohmann::json::array();
  for (const auto& [k, h] : histograms_) j["histograms"].push_back(h);
  j["health"] = nlohmann::json::array();
  for (const auto& [k, h] : health_) j["health"].push_back(h);
  return j;
}

}  // namespace loupe::sinks
