// SPDX-License-Identifier: Apache-2.0
#include "loupe/report/findings_rules.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <vector>

#include "loupe/report/health_share.hpp"
#include "loupe/report/program_view.hpp"
#include "loupe/sdk/units.hpp"

namespace loupe::report {
namespace {

std::string labels_of(const loupe_record& r) {
  std::string s;
  for (std::uint32_t i = 0; i < r.n_labels; ++i)
    s += std::string(s.empty() ? "{" : ",") + r.labels[i].key + "=" + r.labels[i].value;
  return s.empty() ? s : s + "}";
}

}  // namespace

void FindingsRules::add(const loupe_record& r) {
  if (!r.is_final || !r.name) return;
  const std::string who = std::string(r.plugin ? r.plugin : "?") + "/" + r.name;
  if (r.kind == LOUPE_RECORD_STACK_SAMPLE && r.stack && r.stack->n_values > 0) {
    Stacks& s = stacks_[who];
    const loupe_value& v = r.stack->values[0];
    if (s.value_name.empty()) {
      s.value_name = v.name ? v.name : "weight";
      s.unit = v.unit ? v.unit : "";
    }
    const double w = static_cast<double>(v.value);
    if (w <= 0) return;
    s.total += w;
    const auto view = program_view(
        r.stack->frames, r.stack->n_frames, [](const loupe_frame& f) { return f.kind; },
        [](const loupe_frame& f) { return std::string_view(f.symbol ? f.symbol : ""); });
    std::set<std::string> seen;  // recursion: a function counts once per stack
    if (!view.empty() && view[0]->symbol) s.self[view[0]->symbol] += w;
    for (std::size_t i = 0; i < view.size(); ++i) {
      const loupe_frame& f = *view[i];
      if (!f.symbol) continue;
      if (!seen.insert(f.symbol).second) continue;
      s.under[f.symbol] += w;
      s.depth[f.symbol] += w * static_cast<double>(view.size() - 1 - i);
      if (f.kind != LOUPE_FRAME_KERNEL) s.user.insert(f.symbol);
      if (LOUPE_FRAME_IS_SOURCE(f.kind)) s.source.insert(f.symbol);
      if (f.module && !s.module.count(f.symbol)) {
        const char* slash = std::strrchr(f.module, '/');
        s.module[f.symbol] = slash ? slash + 1 : f.module;
      }
    }
  } else if (r.kind == LOUPE_RECORD_HISTOGRAM && r.histogram) {
    const loupe_histogram& h = *r.histogram;
    double p50 = 0, p99 = 0;
    for (std::uint32_t i = 0; i < h.n_percentiles; ++i) {
      if (std::fabs(h.percentiles[i].quantile - 0.5) < 1e-9)
        p50 = static_cast<double>(h.percentiles[i].value);
      if (std::fabs(h.percentiles[i].quantile - 0.99) < 1e-9)
        p99 = static_cast<double>(h.percentiles[i].value);
    }
    if (h.count >= opt_.min_count && p50 > 0 && p99 >= opt_.tail_ratio * p50) {
      const std::string unit = h.unit ? h.unit : "";
      char buf[512];
      std::snprintf(buf, sizeof(buf),
                    "long tail: %s%s: p99 is %.0fx its p50 (p50 %s, p99 %s, max %s, %llu "
                    "values)",
                    who.c_str(), labels_of(r).c_str(), p99 / p50,
                    sdk::human_amount(p50, unit).c_str(), sdk::human_amount(p99, unit).c_str(),
                    sdk::human_amount(static_cast<double>(h.max), unit).c_str(),
                    static_cast<unsigned long long>(h.count));
      tails_.emplace_back(p99 / p50, buf);
    }
  } else if (r.kind == LOUPE_RECORD_FINDING && LOUPE_ABI_HAS_FIELD(&r, loupe_record, finding) &&
             r.finding && r.finding->statement) {
    // The profiler's own rule: it knows what its figures mean; the statement carries them.
    std::string rule = r.finding->rule ? r.finding->rule : "finding";
    std::replace(rule.begin(), rule.end(), '_', ' ');
    said_.emplace_back(r.finding->weight, rule + ": " + r.finding->statement);
  } else if (r.kind == LOUPE_RECORD_HEALTH && r.health && r.health->value > 0 &&
             r.health->severity != LOUPE_HEALTH_OK) {
    const loupe_health& h = *r.health;
    // ABI 1.11: a share of its whole, and lost told from degraded.
    const bool said = LOUPE_ABI_HAS_FIELD(&h, loupe_health, effect);
    const bool degraded = said && h.effect == LOUPE_HEALTH_EFFECT_DEGRADED;
    std::string amount = std::to_string(h.value);
    if (said && h.whole) amount = health_share(h.value, h.whole, h.whole_unit ? h.whole_unit : "");
    losses_.push_back(
        std::string(degraded ? "data degraded: " : "data lost: ") +
        (h.component ? h.component : who) + " = " + amount +
        (h.message && *h.message ? std::string(" (") + h.message + ")" : std::string()));
  }
}

bool FindingsRules::too_few(const Stacks& s) const {
  return s.unit == "count" && s.total < static_cast<double>(opt_.min_count);
}

// The leaf function holding the most weight by itself (a flat profile's first row): in a
// CPU profile of Debian's gzip one function takes a third of the samples, under no single
// caller that holds half of them, and without this rule nothing was said.
std::string FindingsRules::hot_spot(const std::string& who, const Stacks& s,
                                    const std::string& dominant) const {
  std::string best;
  double best_w = 0;
  for (const auto& [fn, w] : s.self)
    if (w > best_w) best = fn, best_w = w;
  if (best.empty() || best_w / s.total < opt_.min_self_share) return {};
  // Said already: the dominant function is that leaf itself.
  if (dominant.find(" is under " + best) != std::string::npos &&
      std::fabs(s.under.at(best) - best_w) < 1e-9)
    return {};
  auto it = s.module.find(best);
  const std::string where = it == s.module.end() || best.find(it->second) != std::string::npos
                                ? best
                                : best + " (" + it->second + ")";
  char buf[768];
  std::snprintf(buf, sizeof(buf), "hot spot: %.0f %% of %s %s (%s of %s) are in %s itself",
                100 * best_w / s.total, who.c_str(), s.value_name.c_str(),
                sdk::human_amount(best_w, s.unit).c_str(),
                sdk::human_amount(s.total, s.unit).c_str(), where.c_str());
  return buf;
}

std::string FindingsRules::dominant(const std::string& who, const Stacks& s) const {
  // The most specific function that still holds min_share of the weight: the deepest
  // from the root (on average over its stacks), the larger share on a tie; user-space
  // code first, as that is what a reader changes (kernel paths are in the flame graph).
  std::string best;
  double best_share = 0, best_depth = -1;
  for (bool user_only : {true, false}) {
    for (const auto& [fn, w] : s.under) {
      const double share = w / s.total;
      if (share < opt_.min_share || (user_only && !s.user.count(fn))) continue;
      const double depth = s.depth.at(fn) / w;
      if (depth > best_depth + 1e-9 ||
          (std::fabs(depth - best_depth) < 1e-9 && share > best_share)) {
        best = fn;
        best_share = share;
        best_depth = depth;
      }
    }
    if (!best.empty()) break;
  }
  if (best.empty()) return {};
  // Where a library function dominates, the code that calls it there: the deepest
  // function of another module that holds min_share too.
  auto module_of = [&](const std::string& fn) {
    auto it = s.module.find(fn);
    return it == s.module.end() ? std::string() : it->second;
  };
  std::string caller;
  double caller_depth = -1;
  const bool library = module_of(best).find(".so") != std::string::npos;
  for (const auto& [fn, w] : library ? s.under : std::map<std::string, double>{}) {
    if (w / s.total < opt_.min_share || module_of(fn) == module_of(best) || !s.user.count(fn))
      continue;
    const double depth = s.depth.at(fn) / w;
    if (depth < best_depth && depth > caller_depth) {
      caller = fn;
      caller_depth = depth;
    }
  }
  const std::string where = module_of(best).empty() ? best : best + " (" + module_of(best) + ")";
  char buf[768];
  std::snprintf(buf, sizeof(buf), "dominant function: %.0f %% of %s %s (%s of %s) is under %s%s",
                100 * best_share, who.c_str(), s.value_name.c_str(),
                sdk::human_amount(best_share * s.total, s.unit).c_str(),
                sdk::human_amount(s.total, s.unit).c_str(), where.c_str(),
                caller.empty() ? "" : (", called from " + caller).c_str());
  return buf;
}

std::vector<std::string> FindingsRules::statements() const {
  std::vector<std::string> out;
  auto said = said_;
  std::stable_sort(said.begin(), said.end(),
                   [](const auto& a, const auto& b) { return a.first > b.first; });
  for (const auto& [weight, line] : said) out.push_back(line);
  for (const auto& [who, s] : stacks_) {
    if (too_few(s)) continue;
    std::string d = dominant(who, s);
    std::string h = hot_spot(who, s, d);
    if (!d.empty()) out.push_back(std::move(d));
    if (!h.empty()) out.push_back(std::move(h));
  }
  auto tails = tails_;
  std::stable_sort(tails.begin(), tails.end(),
                   [](const auto& a, const auto& b) { return a.first > b.first; });
  for (const auto& [ratio, line] : tails) out.push_back(line);
  out.insert(out.end(), losses_.begin(), losses_.end());
  return out;
}

std::vector<FindingsRules::FunctionShare> FindingsRules::functions(const std::string& who,
                                                                   std::size_t limit) const {
  std::vector<FunctionShare> out;
  auto it = stacks_.find(who);
  if (it == stacks_.end() || it->second.total <= 0) return out;
  const Stacks& s = it->second;
  for (const auto& [fn, w] : s.self) {
    if (w <= 0) continue;
    std::string name = fn;
    if (s.source.count(fn))
      if (auto m = s.module.find(fn); m != s.module.end()) name += " (" + m->second + ")";
    out.push_back({name, w / s.total, s.under.at(fn) / s.total});
  }
  std::stable_sort(out.begin(), out.end(), [](const auto& a, const auto& b) {
    return a.self != b.self ? a.self > b.self : a.total > b.total;
  });
  if (out.size() > limit) out.resize(limit);
  return out;
}

}  // namespace loupe::report
