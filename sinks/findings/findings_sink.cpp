// SPDX-License-Identifier: Apache-2.0
//
// findings sink: short statements of what stands out in the final records, each with the
// numbers it rests on; nothing is said without them. It knows record kinds, never
// plugins, so every profiler's records are read by the same rules (README.md lists them):
//   dominant function: in each stack record name, the most specific function (deepest from
//     the root; user-space code first) under which at least `min_share` of the weight lies;
//   long tail: a histogram of at least `min_count` values whose p99 is at least
//     `tail_ratio` times its p50;
//   data lost: a health record that counted a loss (warn or error, value > 0).
// Written at the final flush to <output_dir>/findings.txt, or stdout with path = "-".
#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "loupe/sdk/plugin.hpp"
#include "loupe/sdk/units.hpp"

namespace loupe::sinks {
namespace {

constexpr loupe_config_key kKeys[] = {
    {"path", LOUPE_CFG_STRING, 0, "\"findings.txt\"",
     "where the statements go (relative to output_dir; \"-\" = stdout)", 0, 0, nullptr, 0, 0},
    {"min_share", LOUPE_CFG_FLOAT, 0, "0.5",
     "dominant function: the share of a stack record's weight it must be under", 0, 0, nullptr, 0,
     0},
    {"tail_ratio", LOUPE_CFG_FLOAT, 0, "10.0", "long tail: p99 at least this many times p50", 0, 0,
     nullptr, 0, 0},
    {"min_count", LOUPE_CFG_INT, 0, "20", "long tail: histograms with fewer values say nothing", 1,
     1000000000, nullptr, 0, 0},
};

struct Stacks {
  std::string value_name, unit;
  double total = 0;
  std::map<std::string, double> under;        // function -> weight of the stacks that hold it
  std::map<std::string, double> depth;        // function -> weighted distance from the root
  std::set<std::string> user;                 // functions seen as user-space frames
  std::map<std::string, std::string> module;  // function -> its module's file name
};

std::string labels_of(const loupe_record& r) {
  std::string s;
  for (std::uint32_t i = 0; i < r.n_labels; ++i)
    s += std::string(s.empty() ? "{" : ",") + r.labels[i].key + "=" + r.labels[i].value;
  return s.empty() ? s : s + "}";
}

class FindingsSink : public sdk::Sink {
 public:
  void setup(const sdk::SetupArgs& args) override {
    path_ = args.config.value_string("path");
    min_share_ = args.config.value_float("min_share");
    tail_ratio_ = args.config.value_float("tail_ratio");
    min_count_ = static_cast<std::uint64_t>(args.config.value_int("min_count"));
    output_dir_ = args.session && args.session->output_dir ? args.session->output_dir : "";
  }

  void consume(const loupe_record& r) override {
    if (!r.is_final) return;
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
      std::set<std::string> seen;  // recursion: a function counts once per stack
      for (std::uint32_t i = 0; i < r.stack->n_frames; ++i) {
        const loupe_frame& f = r.stack->frames[i];
        if (!f.symbol || !std::strcmp(f.symbol, "--")) continue;
        if (!seen.insert(f.symbol).second) continue;
        s.under[f.symbol] += w;
        s.depth[f.symbol] += w * (r.stack->n_frames - 1 - i);
        if (f.kind == LOUPE_FRAME_USER) s.user.insert(f.symbol);
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
      if (h.count >= min_count_ && p50 > 0 && p99 >= tail_ratio_ * p50) {
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
    } else if (r.kind == LOUPE_RECORD_HEALTH && r.health && r.health->value > 0 &&
               r.health->severity != LOUPE_HEALTH_OK) {
      losses_.push_back(
          "data lost: " + std::string(r.health->component ? r.health->component : who) + " = " +
          std::to_string(r.health->value) +
          (r.health->message && *r.health->message ? std::string(" (") + r.health->message + ")"
                                                   : std::string()));
    }
  }

  void flush(const sdk::FlushArgs& args) override {
    if (!args.is_final) return;
    std::string text = "FINDINGS\n";
    std::size_t n = 0;
    for (const auto& [who, s] : stacks_) {
      // The most specific function that still holds min_share of the weight: the deepest
      // from the root (on average over its stacks), the larger share on a tie; user-space
      // code first, as that is what a reader changes (kernel paths are in the flame graph).
      std::string best;
      double best_share = 0, best_depth = -1;
      for (bool user_only : {true, false}) {
        for (const auto& [fn, w] : s.under) {
          const double share = w / s.total;
          if (share < min_share_ || (user_only && !s.user.count(fn))) continue;
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
      if (best.empty()) continue;
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
        if (w / s.total < min_share_ || module_of(fn) == module_of(best) || !s.user.count(fn))
          continue;
        const double depth = s.depth.at(fn) / w;
        if (depth < best_depth && depth > caller_depth) {
          caller = fn;
          caller_depth = depth;
        }
      }
      const std::string where =
          module_of(best).empty() ? best : best + " (" + module_of(best) + ")";
      char buf[768];
      std::snprintf(buf, sizeof(buf),
                    "dominant function: %.0f %% of %s %s (%s of %s) is under %s%s\n",
                    100 * best_share, who.c_str(), s.value_name.c_str(),
                    sdk::human_amount(best_share * s.total, s.unit).c_str(),
                    sdk::human_amount(s.total, s.unit).c_str(), where.c_str(),
                    caller.empty() ? "" : (", called from " + caller).c_str());
      text += buf;
      ++n;
    }
    std::sort(tails_.begin(), tails_.end(),
              [](const auto& a, const auto& b) { return a.first > b.first; });
    for (const auto& [ratio, line] : tails_) {
      text += line + "\n";
      ++n;
    }
    for (const auto& line : losses_) {
      text += line + "\n";
      ++n;
    }
    if (n == 0) text += "nothing stands out by the rules (README.md)\n";
    write(text);
  }

 private:
  void write(const std::string& text) {
    if (path_ == "-") {
      std::fwrite(text.data(), 1, text.size(), stdout);
      std::fflush(stdout);
      return;
    }
    std::string p = path_;
    if (p.empty() || p.front() != '/') p = (output_dir_.empty() ? "" : output_dir_ + "/") + p;
    FILE* f = std::fopen(p.c_str(), "w");
    if (!f)
      throw sdk::Error(LOUPE_ERR_RESOURCE,
                       "findings: cannot write '" + p + "': " + std::strerror(errno));
    std::fwrite(text.data(), 1, text.size(), f);
    std::fclose(f);
  }

  std::string path_, output_dir_;
  double min_share_ = 0.5, tail_ratio_ = 10;
  std::uint64_t min_count_ = 20;
  std::map<std::string, Stacks> stacks_;
  std::vector<std::pair<double, std::string>> tails_;
  std::vector<std::string> losses_;
};

}  // namespace
}  // namespace loupe::sinks

LOUPE_SINK(loupe::sinks::FindingsSink, "findings", "0.1.0",
           "statements of what stands out, each with the numbers it rests on", loupe::sinks::kKeys)
