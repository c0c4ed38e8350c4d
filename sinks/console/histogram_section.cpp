// SPDX-License-Identifier: Apache-2.0
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <map>
#include <set>

#include "human_units.hpp"
#include "report_sections.hpp"

namespace loupe::sinks {
namespace {

constexpr double kQuantiles[] = {0.5, 0.9, 0.95, 0.99, 0.999};
constexpr std::size_t kCompactRows = 6;  // bars per histogram unless verbose

const char* scheme_name(std::uint32_t scheme) {
  switch (scheme) {
    case LOUPE_BUCKETS_LOG2: return "log2";
    case LOUPE_BUCKETS_LOG2_LINEAR: return "log2-linear";
    case LOUPE_BUCKETS_EXPLICIT: return "explicit";
    default: return "unknown scheme";
  }
}

std::string quantile_label(double q) {
  char buf[16];
  std::snprintf(buf, sizeof buf, "p%g", q * 100.0);
  return buf;
}

std::string bar(std::uint64_t count, std::uint64_t peak, std::size_t width) {
  std::size_t fill = 0;
  if (peak && count) {
    fill = static_cast<std::size_t>(std::llround(static_cast<double>(count) * width / peak));
    fill = std::clamp<std::size_t>(fill, 1, width);
  }
  return "|" + std::string(fill, '*') + std::string(width - fill, ' ') + "|";
}

// Buckets as given plus explicit empty rows for the ranges between them: a gap in a
// latency distribution is information (bimodal behaviour), so it is shown, not hidden.
std::vector<loupe_bucket> rows_with_gaps(const std::vector<loupe_bucket>& given) {
  std::vector<loupe_bucket> rows;
  for (const auto& b : given) {
    if (!rows.empty() && rows.back().upper < b.lower)
      rows.push_back({rows.back().upper, b.lower, 0});
    rows.push_back(b);
  }
  return rows;
}

// At most `max_rows` rows: the run of neighbouring rows that holds the most values is
// kept as it is, and the rows below and above it are folded into one row each (their
// bounds joined, counts summed), so a wide spread (a slow or emulated machine spans 13
// powers of two) still fits one screen, the bulk keeps its resolution and every row stays
// an exact range. `folded[i]`: how many rows row i holds (1 = as measured).
std::vector<std::size_t> fit_rows(std::vector<loupe_bucket>& rows, std::size_t max_rows) {
  std::vector<std::size_t> folded(rows.size(), 1);
  if (rows.size() <= max_rows || max_rows < 3) return folded;
  const std::size_t keep = max_rows - 2;
  std::size_t best = 0;
  std::uint64_t best_sum = 0;
  for (std::size_t i = 0; i + keep <= rows.size(); ++i) {
    std::uint64_t sum = 0;
    for (std::size_t k = i; k < i + keep; ++k) sum += rows[k].count;
    if (sum > best_sum) best_sum = sum, best = i;
  }
  // A window at either end leaves a row to spare: give it to the window.
  std::size_t lo = best, hi = best + keep;  // [lo, hi) kept
  if (lo == 0)
    hi += 1;
  else if (hi == rows.size())
    lo -= 1;
  std::vector<loupe_bucket> out;
  std::vector<std::size_t> n;
  auto fold = [&](std::size_t a, std::size_t b) {  // rows [a, b) as one
    if (a >= b) return;
    loupe_bucket f{rows[a].lower, rows[b - 1].upper, 0};
    for (std::size_t k = a; k < b; ++k) f.count += rows[k].count;
    out.push_back(f);
    n.push_back(b - a);
  };
  fold(0, lo);
  for (std::size_t k = lo; k < hi; ++k) fold(k, k + 1);
  fold(hi, rows.size());
  rows.swap(out);
  return n;
}

// The smallest value, as far as the record can tell: a producer that does not measure
// it sends 0 beside a lowest bucket that cannot hold 0, and then the bucket's bound is
// what is known, written as the bucket row writes it ("min >512 ns" above "(512 ns, ...").
std::string min_text(const HistogramCopy& h) {
  for (const auto& b : h.buckets) {
    if (!b.count) continue;
    if (h.min < b.lower) return ">" + format_bound(b.lower - 1, h.unit);
    break;
  }
  return format_quantity(static_cast<double>(h.min), h.unit);
}

std::string pct(const HistogramCopy& h, double q) {
  const std::vector<loupe_percentile> derived =
      h.percentiles.empty() ? percentiles_from_buckets(h) : std::vector<loupe_percentile>{};
  for (const auto& e : h.percentiles.empty() ? derived : h.percentiles)
    if (std::fabs(e.quantile - q) < 1e-9)
      return "  " + quantile_label(q) + " " + format_quantity(static_cast<double>(e.value), h.unit);
  return std::string();
}

}  // namespace

std::vector<loupe_percentile> percentiles_from_buckets(const HistogramCopy& h) {
  std::vector<loupe_percentile> out;
  std::uint64_t total = 0;
  for (const auto& b : h.buckets) total += b.count;
  if (total == 0) return out;
  for (double q : kQuantiles) {
    auto rank = static_cast<std::uint64_t>(std::ceil(q * static_cast<double>(total)));
    rank = std::max<std::uint64_t>(rank, 1);
    std::uint64_t seen = 0;
    for (const auto& b : h.buckets) {
      seen += b.count;
      if (seen < rank) continue;
      std::uint64_t mid = b.upper == UINT64_MAX ? b.lower : b.lower + (b.upper - b.lower) / 2;
      if (h.max >= h.min && h.count) mid = std::clamp(mid, h.min, h.max);
      out.push_back({q, mid, b.lower, b.upper});
      break;
    }
  }
  return out;
}

void render_histograms(const ProducerRecords& p, const ReportOptions& opt, const TextStyle& style,
                       Blocks& blocks) {
  // Names as the producer sent them, and within a name the busiest series first, as in
  // the pivot table above.
  std::vector<const HistogramSeries*> order;
  for (const auto& [key, series] : p.histograms) order.push_back(&series);
  auto pos = [&p](const std::string& name) {
    return std::find(p.order.begin(), p.order.end(), name) - p.order.begin();
  };
  std::stable_sort(order.begin(), order.end(), [&](const auto* a, const auto* b) {
    if (pos(a->name) != pos(b->name)) return pos(a->name) < pos(b->name);
    return a->hist.count > b->hist.count;
  });

  // Drawn: the busiest series, at most drawn_per_name of a name and drawn_per_section in
  // all (verbose: `top` of each name); each name's others are counted on one line.
  const std::size_t per_name = opt.verbose ? opt.top : std::min(opt.top, opt.drawn_per_name);
  const std::size_t per_section = opt.verbose ? SIZE_MAX : opt.drawn_per_section;
  std::vector<const HistogramSeries*> busiest = order;
  std::stable_sort(busiest.begin(), busiest.end(),
                   [](const auto* a, const auto* b) { return a->hist.count > b->hist.count; });
  std::set<const HistogramSeries*> drawn;
  std::map<std::string, std::size_t> of_name;
  for (const HistogramSeries* s : busiest)
    if (drawn.size() < per_section && of_name[s->name] < per_name) {
      drawn.insert(s);
      ++of_name[s->name];
    }
  std::set<std::string> counted;
  std::string not_drawn;  // one block after the drawn ones
  for (std::size_t at = 0; at < order.size(); ++at) {
    const HistogramSeries* series = order[at];
    const HistogramCopy& h = series->hist;
    const std::string& unit = h.unit;
    if (!drawn.count(series)) {
      // The first series left out speaks for all of its name's.
      if (!counted.insert(series->name).second) continue;
      std::size_t n = 0;
      std::uint64_t left = 0, all = 0;
      for (const HistogramSeries* other : order) {
        if (other->name != series->name) continue;
        all += other->hist.count;
        if (!drawn.count(other)) left += other->hist.count, ++n;
      }
      std::string more =
          "… " + std::to_string(n) + " more " + series->name + " histogram(s) not drawn, " +
          format_count(left) + " of " + format_count(all) + " values" +
          (all ? " (" + format_percent(static_cast<double>(left) / static_cast<double>(all)) + ")"
               : "");
      not_drawn += "  " + style.dim(more) + "\n";
      continue;
    }
    // The stats are the line's point: a long series name gives way to them.
    std::string stats = "  count " + format_count(h.count);
    if (h.count) {
      stats += "  min " + min_text(h) + pct(h, 0.5) + pct(h, 0.99) + "  max " +
               format_quantity(static_cast<double>(h.max), unit);
    }
    std::string title = series_name(series->name, series->labels);
    const std::size_t room =
        opt.width > display_width(stats) + 2 + 16 ? opt.width - display_width(stats) - 2 : 16;
    std::string out = "  " + style.bold(elide_middle(title, room));
    if (opt.verbose)
      out += "  (" + (unit.empty() ? std::string("no unit") : unit) + ", " + scheme_name(h.scheme) +
             (h.scheme == LOUPE_BUCKETS_LOG2_LINEAR
                  ? ", " + std::to_string(h.sub_buckets) + " sub-buckets"
                  : std::string()) +
             ")";
    out += stats + "\n";
    std::vector<loupe_percentile> pcts =
        h.percentiles.empty() ? percentiles_from_buckets(h) : h.percentiles;
    if (h.buckets.empty()) {
      blocks.push_back(std::move(out));
      continue;
    }

    std::uint64_t total = 0, peak = 0;
    for (const auto& b : h.buckets) {
      total += b.count;
      peak = std::max(peak, b.count);
    }
    std::vector<loupe_bucket> rows = rows_with_gaps(h.buckets);
    const std::vector<std::size_t> folded =
        fit_rows(rows, opt.verbose ? rows.size() : kCompactRows);
    peak = 0;
    for (const auto& b : rows) peak = std::max(peak, b.count);
    std::size_t rw = 0, cw = 5;
    for (const auto& b : rows) {
      rw = std::max(rw, display_width(format_range(b.lower, b.upper, unit)));
      cw = std::max(cw, display_width(format_count(b.count)));
    }
    if (opt.verbose)
      out += style.dim("    " + pad_right("range", rw + 1) + pad_left("count", cw) + " " +
                       pad_right("|distribution", opt.bar_width + 2) + "  " + pad_left("pct", 6) +
                       "  " + pad_left("cum", 6)) +
             "\n";
    std::uint64_t cum = 0;
    for (std::size_t r = 0; r < rows.size(); ++r) {
      const loupe_bucket& b = rows[r];
      cum += b.count;
      double share = total ? static_cast<double>(b.count) / static_cast<double>(total) : 0;
      double cshare = total ? static_cast<double>(cum) / static_cast<double>(total) : 0;
      out += "    " + pad_left(format_range(b.lower, b.upper, unit), rw) + " " +
             pad_left(format_count(b.count), cw) + " " + bar(b.count, peak, opt.bar_width) + "  " +
             pad_left(format_percent(share), 6) + "  " + pad_left(format_percent(cshare), 6) +
             (folded[r] > 1 ? style.dim("  (" + std::to_string(folded[r]) + " buckets)") : "") +
             "\n";
    }
    // The estimates' error bounds and the sum: for whoever wants every figure.
    if (opt.verbose && h.count) {
      out += "    sum " + format_quantity(static_cast<double>(h.sum), unit) + "   mean " +
             format_quantity(static_cast<double>(h.sum) / static_cast<double>(h.count), unit) +
             "\n";
      for (const auto& e : pcts)
        out += "    " + pad_right(quantile_label(e.quantile), 6) + "≈ " +
               pad_right(format_quantity(static_cast<double>(e.value), unit), 10) + " (in " +
               format_range(e.lower, e.upper, unit) + ")\n";
    }
    blocks.push_back(std::move(out));
  }
  if (!not_drawn.empty()) blocks.push_back(std::move(not_drawn));
}

}  // namespace loupe::sinks
