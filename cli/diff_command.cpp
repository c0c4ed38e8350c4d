// SPDX-License-Identifier: Apache-2.0
//
// loupe diff BASE NEW: two runs' final records (records.jsonl, or the output directory that
// holds it) side by side.
//   - histograms: count, and p50/p90/p99 with the bounds the buckets allow; a percentile
//     has shifted only when the two runs' bounds no longer overlap (a move inside one
//     bucket's error is not a shift) and a rank test of the two runs' bucketed values
//     agrees (a median moving one bucket between two runs of 15 alike sleeps on a busy
//     machine is noise), and is judged only when at least 5 values lie above it in each run;
//   - stacks: each stack's share of its record's total weight, flagged when it moved by at
//     least --threshold percentage points and a two-proportion test of the events behind
//     it (samples, blocks, allocations: the stack's first `count` measure) agrees at the
//     histograms' |z| >= 3.3 (shown, not flagged, otherwise); --folded-diff writes flamegraph's
//     difffolded input ("stack base new") for a differential flame graph;
//   - counters: the relative change of each metric, shown from --threshold percent (not
//     flagged: counts follow the run's length).
// Exit status: 0 nothing flagged, 8 something flagged (a CI job's regression gate), 2 bad
// input (docs/cli.md; 1 is a failed run's).
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "commands.hpp"
#include "loupe/report/folded_frame.hpp"
#include "loupe/report/program_view.hpp"
#include "loupe/report/records_file.hpp"
#include "loupe/sdk/units.hpp"
#include "loupe/session.hpp"

namespace loupe::cli {
namespace {

using nlohmann::json;

struct Run {
  std::map<std::string, json> histograms;                       // key -> histogram
  std::map<std::string, std::map<std::string, double>> stacks;  // plugin/name -> stack -> w
  // The events behind each stack's weight (its first `count` measure: samples, blocks,
  // allocations), which the share test needs: a weight in ns or bytes is not a count.
  std::map<std::string, std::map<std::string, double>> stack_events;
  std::map<std::string, double> metrics;  // key -> value
};

std::string key_of(const json& r) {
  std::string k = report::text_field(r, "plugin") + "/" + report::text_field(r, "name");
  auto labels = r.find("labels");
  if (labels != r.end() && labels->is_object() && !labels->empty()) {
    k += "{";
    bool first = true;
    for (const auto& [lk, lv] : labels->items()) {  // nlohmann sorts object keys
      k += (first ? "" : ",") + lk + "=" + (lv.is_string() ? lv.get<std::string>() : lv.dump());
      first = false;
    }
    k += "}";
  }
  return k;
}

// Root first, each frame named as the folded sink names it (an unsymbolized frame is its
// module's file name + offset), so --folded-diff lines match cpu.folded's. A stack that
// holds a language's frames is its program view (report/program_view.hpp): its functions
// alone, so that two runs' stacks of one Python or Java call path meet however their
// interpreter's frames and native leaves differ.
std::string folded(const json& frames) {
  std::vector<loupe_frame> all;
  if (frames.is_array())
    for (const auto& f : frames) all.push_back(report::frame_from_json(f));
  auto view = report::program_view(
      all.data(), all.size(), [](const loupe_frame& f) { return f.kind; },
      [](const loupe_frame& f) { return std::string_view(f.symbol ? f.symbol : ""); });
  if (view.empty() || !LOUPE_FRAME_IS_SOURCE(view.front()->kind)) {
    view.clear();
    for (const auto& f : all) view.push_back(&f);
  }
  std::string s;
  for (std::size_t i = view.size(); i-- > 0;) {  // records are leaf first
    if (!s.empty()) s += ';';
    report::append_folded_frame(*view[i], s);
  }
  return s.empty() ? "[no stack]" : s;
}

const json& member(const json& r, const char* key) {
  static const json kNull;
  auto it = r.find(key);
  return it != r.end() ? *it : kNull;
}

bool load(const std::string& where, const std::string& value, Run* run, std::string* err) {
  std::size_t final_records = 0;
  const report::RecordsFileError read = report::for_each_record(where, [&](const json& r) {
    if (!r.is_object() || !r.value("is_final", false)) return;
    ++final_records;
    const std::string kind = report::text_field(r, "kind");
    if (kind == "histogram" && member(r, "histogram").is_object()) {
      run->histograms[key_of(r)] = r["histogram"];
    } else if (kind == "metric") {
      // A NaN figure is written as null: nothing to compare.
      const double v = report::number_field(member(r, "metric"), "value", std::nan(""));
      if (!std::isnan(v)) run->metrics[key_of(r)] = v;
    } else if (kind == "stack" && member(r, "stack").is_object()) {
      const json& values = member(r["stack"], "values");
      if (!values.is_array()) return;
      double w = 0;
      bool found = value.empty() && !values.empty();
      if (found) w = report::number_field(values[0], "value");
      for (const auto& v : values)
        if (!value.empty() && report::text_field(v, "name") == value) {
          w = report::number_field(v, "value");
          found = true;
        }
      if (!found) return;
      const std::string name =
          report::text_field(r, "plugin") + "/" + report::text_field(r, "name");
      const std::string stack = folded(member(r["stack"], "frames"));
      run->stacks[name][stack] += w;
      for (const auto& v : values)
        if (report::text_field(v, "unit") == "count") {
          run->stack_events[name][stack] += report::number_field(v, "value");
          break;
        }
    }
  });
  if (read.kind == report::RecordsFileError::kUnreadable) {
    *err = read.path + ": cannot read (a records.jsonl, or the output directory holding it)";
    return false;
  }
  if (read) {
    *err = read.path + ":" + std::to_string(read.line) + ": not a record: " + read.what;
    return false;
  }
  if (final_records == 0) {
    *err = read.path + ": no final records (did the run end, and did it have a jsonl sink?)";
    return false;
  }
  return true;
}

// p < 0.001 two-sided: a diff is a regression gate, and a false alarm costs a CI run.
constexpr double kShiftZ = 3.3;

struct Bounds {
  double value = 0, lower = 0, upper = 0;
  bool ok = false;
};

Bounds percentile(const json& h, double q) {
  Bounds b;
  const json& pcts = member(h, "percentiles");
  if (!pcts.is_array()) return b;
  for (const auto& p : pcts)
    if (std::fabs(report::number_field(p, "q") - q) < 1e-9) {
      b.value = report::number_field(p, "value");
      b.lower = report::number_field(p, "lower", b.value);
      b.upper = report::number_field(p, "upper", b.value);
      b.ok = true;
    }
  return b;
}

// Mann-Whitney U of the two runs' values as their histograms keep them (a bucket's values
// tie), as a z score: > 0 when NEW's values rank above BASE's. Ties shrink the variance
// (the usual correction); 0 when either run has no values.
double rank_shift_z(const json& base, const json& next) {
  std::map<std::pair<double, double>, std::pair<double, double>> counts;  // bucket -> (b, n)
  double nb = 0, nn = 0;
  auto add = [&](const json& h, bool is_next) {
    const json& buckets = member(h, "buckets");
    if (!buckets.is_array()) return;
    for (const auto& b : buckets) {
      const double c = report::number_field(b, "count");
      auto& slot = counts[{report::number_field(b, "lower"), report::number_field(b, "upper")}];
      (is_next ? slot.second : slot.first) += c;
      (is_next ? nn : nb) += c;
    }
  };
  add(base, false);
  add(next, true);
  if (nb == 0 || nn == 0) return 0;
  double u = 0, base_below = 0, ties = 0;
  for (const auto& [bucket, c] : counts) {
    u += c.second * (base_below + c.first / 2);
    base_below += c.first;
    const double t = c.first + c.second;
    ties += t * t * t - t;
  }
  const double n = nb + nn;
  const double var = nb * nn / 12 * ((n + 1) - ties / (n * (n - 1)));
  return var > 0 ? (u - nb * nn / 2) / std::sqrt(var) : 0;
}

}  // namespace

int cmd_diff(const DiffOptions& o) {
  Run base, next;
  std::string err;
  if (!load(o.base, o.value, &base, &err) || !load(o.next, o.value, &next, &err)) {
    std::fprintf(stderr, "loupe: error: diff: %s\n", err.c_str());
    return static_cast<int>(ExitCode::kUsage);
  }
  int flagged = 0;
  std::printf("loupe diff %s %s\n", o.base.c_str(), o.next.c_str());

  std::printf(
      "\nhistograms (a percentile shifted when the two runs' bucket bounds no longer "
      "overlap and a rank test of their values agrees, |z| >= %.1f)\n",
      kShiftZ);
  int shown = 0;
  for (const auto& [key, hb] : base.histograms) {
    auto it = next.histograms.find(key);
    if (it == next.histograms.end()) continue;
    const json& hn = it->second;
    const std::string unit = report::text_field(hb, "unit");
    std::string line;
    bool shift = false;
    const double cb = report::number_field(hb, "count"), cn = report::number_field(hn, "count");
    const double z = rank_shift_z(hb, hn);
    bool noise = false;
    for (double q : {0.5, 0.9, 0.99}) {
      Bounds b = percentile(hb, q), n = percentile(hn, q);
      if (!b.ok || !n.ok) continue;
      // A percentile is judged only with at least kAbove values above it in both runs:
      // with fewer (p99 of 15 values is the maximum) one outlier moves it.
      constexpr double kAbove = 5;
      const bool judged = cb * (1 - q) >= kAbove && cn * (1 - q) >= kAbove;
      const bool apart_up = judged && n.lower >= b.upper && n.value > b.value;
      const bool apart_down = judged && n.upper <= b.lower && n.value < b.value;
      const bool up = apart_up && z >= kShiftZ, down = apart_down && z <= -kShiftZ;
      noise |= (apart_up || apart_down) && !up && !down;
      char buf[192];
      std::snprintf(buf, sizeof(buf), "  p%g %s -> %s%s", q * 100,
                    sdk::human_amount(b.value, unit).c_str(),
                    sdk::human_amount(n.value, unit).c_str(),
                    up       ? " UP"
                    : down   ? " DOWN"
                    : judged ? ""
                             : " (too few values to judge)");
      line += buf;
      shift |= up || down;
    }
    if (shift || noise) {
      char buf[96];
      std::snprintf(
          buf, sizeof(buf),
          shift ? "  (rank test z %.1f)" : "  (apart, but rank test z %.1f: within noise)", z);
      line += buf;
    }
    if (!shift && !noise && !o.all) continue;
    flagged += shift;
    shown += shift;
    std::printf("  %s  count %.0f -> %.0f%s\n", key.c_str(), cb, cn, line.c_str());
  }
  for (const auto& [key, h] : next.histograms)
    if (!base.histograms.count(key) && o.all) std::printf("  %s  only in NEW\n", key.c_str());
  if (!shown) std::printf("  no shift\n");

  std::printf(
      "\nstacks (share of the record's total, moved by >= %.1f percentage points and a "
      "two-proportion test of their events agrees, |z| >= %.1f)\n",
      o.threshold, kShiftZ);
  std::ofstream fold;
  if (!o.folded_diff.empty()) fold.open(o.folded_diff);
  shown = 0;
  std::map<std::string, bool> names;
  for (const auto& [n, _] : base.stacks) names[n] = true;
  for (const auto& [n, _] : next.stacks) names[n] = true;
  for (const auto& [name, _] : names) {
    const auto& sb = base.stacks[name];
    const auto& sn = next.stacks[name];
    double tb = 0, tn = 0;
    for (const auto& [s, w] : sb) tb += w;
    for (const auto& [s, w] : sn) tn += w;
    std::map<std::string, std::pair<double, double>> both;
    for (const auto& [s, w] : sb) both[s].first = w;
    for (const auto& [s, w] : sn) both[s].second = w;
    // The events behind the shares: with ~80 samples a run, a stack at 45 % moves by 7
    // points between two runs of the same command by chance alone.
    const auto& eb = base.stack_events[name];
    const auto& en = next.stack_events[name];
    double nb = 0, nn = 0;
    for (const auto& [s, c] : eb) nb += c;
    for (const auto& [s, c] : en) nn += c;
    auto events = [](const std::map<std::string, double>& m, const std::string& s) {
      auto it = m.find(s);
      return it == m.end() ? 0.0 : it->second;
    };
    struct Move {
      double delta;
      std::string stack;
      double z;  // NaN: no events to test (the run kept none): flagged on the share alone
    };
    std::vector<Move> moves;
    for (const auto& [s, w] : both) {
      if (fold)
        fold << (names.size() > 1 ? name + ";" : "") << s << " " << std::llround(w.first) << " "
             << std::llround(w.second) << "\n";
      const double pb = tb > 0 ? 100 * w.first / tb : 0, pn = tn > 0 ? 100 * w.second / tn : 0;
      if (std::fabs(pn - pb) < o.threshold) continue;
      double z = std::nan("");
      if (nb > 0 && nn > 0) {
        const double cb = events(eb, s), cn = events(en, s);
        const double p = (cb + cn) / (nb + nn);
        const double se = std::sqrt(p * (1 - p) * (1 / nb + 1 / nn));
        z = se > 0 ? (cn / nn - cb / nb) / se : 0;
      }
      moves.push_back({pn - pb, s, z});
    }
    std::sort(moves.begin(), moves.end(),
              [](const Move& a, const Move& b) { return std::fabs(a.delta) > std::fabs(b.delta); });
    int noise = 0;
    for (std::size_t i = 0; i < moves.size(); ++i) {
      const Move& m = moves[i];
      const bool flag = std::isnan(m.z) || std::fabs(m.z) >= kShiftZ;
      flagged += flag;
      noise += !flag;
      if (i >= 10) continue;
      const auto& w = both[m.stack];
      char test[64] = "";
      if (!std::isnan(m.z))
        std::snprintf(test, sizeof(test), flag ? " (z %.1f)" : " (z %.1f: within noise)", m.z);
      std::printf("  %s  %+.1f pp (%.1f%% -> %.1f%%)%s  %s\n", name.c_str(), m.delta,
                  tb > 0 ? 100 * w.first / tb : 0, tn > 0 ? 100 * w.second / tn : 0, test,
                  m.stack.c_str());
      ++shown;
    }
    if (noise)
      std::printf(
          "  %s: %d move(s) within the sampling noise of %.0f and %.0f events, not flagged\n",
          name.c_str(), noise, nb, nn);
  }
  if (!shown) std::printf("  no stack moved\n");

  std::printf("\ncounters (changed by >= %.1f %%; not flagged: counts follow the run's length)\n",
              o.threshold);
  shown = 0;
  for (const auto& [key, vb] : base.metrics) {
    auto it = next.metrics.find(key);
    if (it == next.metrics.end()) continue;
    const double vn = it->second;
    const double pct = vb != 0 ? 100 * (vn - vb) / std::fabs(vb) : (vn != 0 ? 100 : 0);
    if (std::fabs(pct) < o.threshold && !o.all) continue;
    if (shown++ >= 30 && !o.all) continue;
    std::printf("  %s  %.6g -> %.6g (%+.1f %%)\n", key.c_str(), vb, vn, pct);
  }
  if (!shown) std::printf("  no counter changed\n");
  std::printf("\n%d change%s flagged\n", flagged, flagged == 1 ? "" : "s");
  return flagged ? static_cast<int>(ExitCode::kDiffChanged) : 0;
}

}  // namespace loupe::cli
