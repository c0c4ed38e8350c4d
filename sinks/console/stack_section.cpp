// SPDX-License-Identifier: Apache-2.0
#include <algorithm>
#include <map>
#include <set>

#include "human_units.hpp"
#include "loupe/report/program_view.hpp"
#include "report_sections.hpp"

namespace loupe::sinks {
namespace {

// Narrowest room for a stack's frames, however wide the columns before them.
constexpr std::size_t kNarrowestFrames = 40;
// Room a stack's labels and frames keep before further values leave their columns.
constexpr std::size_t kRoomForFrames = 48;

std::int64_t first_value(const StackEntry& e) {
  return e.values.empty() ? 0 : e.values[0].value;
}

// A function as the flat table sums it: a language frame by its name and file (its line
// differs from sample to sample), any other frame as every report names it.
std::string function_of(const FrameCopy& f) {
  if (LOUPE_FRAME_IS_SOURCE(f.kind) && f.symbol) {
    std::string file = f.module ? *f.module : "";
    if (auto slash = file.rfind('/'); slash != std::string::npos) file = file.substr(slash + 1);
    return file.empty() ? *f.symbol : *f.symbol + " (" + file + ")";
  }
  return frame_text(f);
}

// The flat view perf report, pprof -top and py-spy open with: functions by self (the
// innermost frame of the program's view) and total (anywhere in it) share of the first
// value, the heaviest by self first.
std::string flat_table(const std::string& name, const std::vector<const StackEntry*>& entries,
                       std::int64_t total, const ReportOptions& opt, const TextStyle& style) {
  // One stack says it all already.
  if (total <= 0 || entries.size() < 2) return {};
  struct Sum {
    std::int64_t self = 0, total = 0;
    double from_root = 0;  // frames from the root, weighted: callers sit nearer it
  };
  std::map<std::string, Sum> by;
  for (const StackEntry* e : entries) {
    const auto view = report::program_view(
        e->frames.data(), e->frames.size(), [](const FrameCopy& f) { return f.kind; },
        [](const FrameCopy& f) { return std::string_view(f.symbol ? *f.symbol : ""); });
    if (view.empty()) continue;
    const std::int64_t v = first_value(*e);
    by[function_of(*view.front())].self += v;
    std::set<std::string> seen;
    for (std::size_t i = 0; i < view.size(); ++i) {
      const std::string fn = function_of(*view[i]);
      if (!seen.insert(fn).second) continue;
      by[fn].total += v;
      by[fn].from_root += static_cast<double>(v) * static_cast<double>(view.size() - 1 - i);
    }
  }
  std::vector<std::pair<std::string, Sum>> rows(by.begin(), by.end());
  std::stable_sort(rows.begin(), rows.end(), [](const auto& a, const auto& b) {
    return a.second.self != b.second.self ? a.second.self > b.second.self
                                          : a.second.total > b.second.total;
  });
  // Functions that ran themselves, as many as the stack rows, up to 8; then the callers
  // that hold a tenth or more of the total without running much themselves (perf report's
  // children view: `parse` under which a library's decoder runs), three at most, leaving
  // out what nearly every stack holds (`<module>`, `main`: true of every run).
  std::vector<std::pair<std::string, Sum>> shown_rows;
  for (const auto& r : rows)
    if (r.second.self > 0 && shown_rows.size() < std::min<std::size_t>(opt.top, 8))
      shown_rows.push_back(r);
  std::vector<std::pair<std::string, Sum>> callers;
  for (const auto& r : rows) {
    const double share = static_cast<double>(r.second.total) / static_cast<double>(total);
    const bool shown = std::any_of(shown_rows.begin(), shown_rows.end(),
                                   [&](const auto& s) { return s.first == r.first; });
    if (!shown && share >= 0.10 && share < 0.99) callers.push_back(r);
  }
  // The heaviest first; of callers on the same stacks (parse -> loads -> decode), the
  // one nearest the root: the program's own.
  std::stable_sort(callers.begin(), callers.end(), [](const auto& a, const auto& b) {
    if (a.second.total != b.second.total) return a.second.total > b.second.total;
    return a.second.from_root < b.second.from_root;
  });
  if (callers.size() > 3) callers.resize(3);
  const std::size_t functions = rows.size();
  rows = std::move(shown_rows);
  rows.insert(rows.end(), callers.begin(), callers.end());
  const std::size_t shown = rows.size();
  if (shown == 0) return {};
  TextTable table({true, true, false});
  table.row({"self", "total", "function"});
  const auto pct = [total](std::int64_t v) {
    return format_percent(static_cast<double>(v) / static_cast<double>(total));
  };
  const std::size_t room = opt.width > 24 ? opt.width - 24 : 40;
  for (std::size_t i = 0; i < shown; ++i)
    table.row(
        {pct(rows[i].second.self), pct(rows[i].second.total), elide_middle(rows[i].first, room)});
  std::string out = "  " + style.bold(name) + "  functions by self, of " + format_count(functions) +
                    " (the program's frames: its language's when it "
                    "has them, else its own code)\n";
  auto lines = table.lines("    ");
  for (std::size_t i = 0; i < lines.size(); ++i)
    out += (i == 0 ? style.dim(lines[i]) : lines[i]) + "\n";
  return out;
}

}  // namespace

void render_stacks(const ProducerRecords& p, const ReportOptions& opt, const TextStyle& style,
                   Blocks& blocks) {
  // The primary view first (with its flat table), then the others as they arrived.
  std::vector<std::string> names = p.stack_order;
  for (const auto& [name, unused] : p.stacks)
    if (std::find(names.begin(), names.end(), name) == names.end()) names.push_back(name);
  std::size_t left_out = 0;
  for (std::size_t n = 0; n < names.size(); ++n) {
    const std::string& name = names[n];
    auto found = p.stacks.find(name);
    if (found == p.stacks.end()) continue;
    if (n > 0 && opt.primary_only) {
      ++left_out;
      continue;
    }
    const auto& table_by_key = found->second;
    std::vector<const StackEntry*> entries;
    std::int64_t total = 0;
    std::string vname = "value", vunit;
    bool since_start = false;
    for (const auto& [key, e] : table_by_key) {
      entries.push_back(&e);
      since_start = since_start || e.since_start;
      total += first_value(e);
      if (!e.values.empty()) {
        vname = e.values[0].name;
        vunit = e.values[0].unit;
      }
    }
    std::stable_sort(entries.begin(), entries.end(), [](const StackEntry* a, const StackEntry* b) {
      return first_value(*a) > first_value(*b);
    });
    if (n == 0)
      if (std::string flat = flat_table(name, entries, total, opt, style); !flat.empty())
        blocks.push_back(std::move(flat));
    std::size_t shown = std::min(entries.size(), opt.top);
    // A label every row shown has with the same value (one process, one sampling mode)
    // is said once, in the title, and leaves its room to the frames.
    Labels common;
    if (shown > 1)
      for (const auto& kv : entries[0]->labels)
        if (std::all_of(entries.begin(), entries.begin() + static_cast<std::ptrdiff_t>(shown),
                        [&kv](const StackEntry* e) {
                          return std::find(e->labels.begin(), e->labels.end(), kv) !=
                                 e->labels.end();
                        }))
          common.push_back(kv);
    auto own_labels = [&common](const Labels& labels) {
      Labels out;
      for (const auto& kv : labels)
        if (std::find(common.begin(), common.end(), kv) == common.end()) out.push_back(kv);
      return out;
    };
    std::string out = "  " + style.bold(name) + "  top " + std::to_string(shown) + " of " +
                      format_count(entries.size()) + " stacks by " + vname + ", total " +
                      format_quantity(static_cast<double>(total), vunit) +
                      (opt.after_start && since_start ? ", since the session began" : "") +
                      (common.empty() ? "" : ", each [" + stack_labels_text(common) + "]") + "\n";

    // Values beyond the first (bytes next to a count, ...) are columns of their own, as
    // long as the frames keep room beside them; else each goes on a line under its stack.
    // A value equal to the first in every row shown (offcpu's time_ns, kept for the wall
    // view's folded file) says nothing more: it shows with verbose only.
    auto restates_first = [&](const std::string& n) {
      return std::all_of(entries.begin(), entries.begin() + static_cast<std::ptrdiff_t>(shown),
                         [&n](const StackEntry* e) {
                           auto it = std::find_if(e->values.begin(), e->values.end(),
                                                  [&n](const ValueCopy& v) { return v.name == n; });
                           return it == e->values.end() ||
                                  (it->unit == e->values[0].unit && it->value == first_value(*e));
                         });
    };
    std::vector<std::string> extra_names;
    for (std::size_t i = 0; i < shown; ++i)
      for (std::size_t v = 1; v < entries[i]->values.size(); ++v)
        if (std::find(extra_names.begin(), extra_names.end(), entries[i]->values[v].name) ==
                extra_names.end() &&
            (opt.verbose || !restates_first(entries[i]->values[v].name)))
          extra_names.push_back(entries[i]->values[v].name);
    std::vector<std::string> header = {"#", vname, "share"};
    header.insert(header.end(), extra_names.begin(), extra_names.end());
    std::vector<std::vector<std::string>> lead;
    for (std::size_t i = 0; i < shown; ++i) {
      const StackEntry& e = *entries[i];
      double share =
          total > 0 ? static_cast<double>(first_value(e)) / static_cast<double>(total) : 0;
      std::vector<std::string> cells = {std::to_string(i + 1),
                                        format_quantity(static_cast<double>(first_value(e)), vunit),
                                        format_percent(share)};
      for (const auto& n : extra_names) {
        auto it = std::find_if(e.values.begin() + 1, e.values.end(),
                               [&n](const ValueCopy& v) { return v.name == n; });
        cells.push_back(
            it == e.values.end() ? "-" : format_quantity(static_cast<double>(it->value), it->unit));
      }
      lead.push_back(std::move(cells));
    }
    auto lead_width = [&](std::size_t columns) {
      std::size_t w = 4;
      for (std::size_t c = 0; c < columns; ++c) {
        std::size_t cw = display_width(header[c]);
        for (const auto& row : lead) cw = std::max(cw, display_width(row[c]));
        w += cw + 2;
      }
      return w;
    };
    const bool extras_apart =
        !extra_names.empty() && lead_width(header.size()) + kRoomForFrames > opt.width;
    const std::size_t columns = extras_apart ? 3 : header.size();
    const std::size_t used = lead_width(columns);
    const std::size_t room =
        opt.width > used + kNarrowestFrames ? opt.width - used : kNarrowestFrames;

    std::vector<bool> right(columns, true);
    right.push_back(false);
    TextTable table(right);
    header.resize(columns);
    header.push_back("frames (leaf → root)");
    table.row(header);
    for (std::size_t i = 0; i < shown; ++i) {
      const StackEntry& e = *entries[i];
      // Labels (pid, comm, reason...) leave the frames half the room, or kNarrowestFrames
      // when that is less; the frames keep the leaf and its caller, the rest counted.
      const std::size_t label_room = room - std::min(room / 2, kNarrowestFrames) - 3;
      const Labels mine = own_labels(e.labels);
      std::string labels =
          mine.empty() ? "" : "[" + elide_middle(stack_labels_text(mine), label_room) + "] ";
      std::size_t left = room - std::min(room, display_width(labels));
      std::vector<std::string> cells(lead[i].begin(),
                                     lead[i].begin() + static_cast<std::ptrdiff_t>(columns));
      // A wakee's stack above its waker's: the waker's goes on a line of its own, with the
      // whole width of the frames column.
      std::vector<FrameCopy> frames = e.frames;
      const auto waker = split_waker(frames);
      cells.push_back(labels + folded_frames_fit(frames, left));
      table.row(std::move(cells));
      if (waker) {
        std::vector<std::string> under(columns, "");
        under.push_back("⇐ woken by " + folded_frames_fit(*waker, room - 11));
        table.row(std::move(under));
      }
      if (extras_apart) {
        std::string extra;
        for (std::size_t v = 0; v < extra_names.size(); ++v)
          if (lead[i][3 + v] != "-") extra += "  " + extra_names[v] + "=" + lead[i][3 + v];
        if (!extra.empty()) table.row({"", "", "", extra.substr(2)});
      }
    }
    auto lines = table.lines("    ");
    for (std::size_t i = 0; i < lines.size(); ++i)
      out += (i == 0 ? style.dim(lines[i]) : lines[i]) + "\n";
    if (entries.size() > shown) {
      std::int64_t left = 0;
      for (std::size_t i = shown; i < entries.size(); ++i) left += first_value(*entries[i]);
      out += "    " +
             style.dim("… " + format_count(entries.size() - shown) + " more stack(s)" +
                       (total > 0 ? " with " +
                                        format_percent(static_cast<double>(left) /
                                                       static_cast<double>(total)) +
                                        " of " + vname
                                  : "") +
                       " (console top = " + std::to_string(opt.top) + ")") +
             "\n";
    }
    blocks.push_back(std::move(out));
  }
  if (left_out)
    blocks.push_back("  " +
                     style.dim("… " + std::to_string(left_out) +
                               " more stack table(s) left out to fit (console lines = 0 "
                               "shows them)") +
                     "\n");
}

}  // namespace loupe::sinks
