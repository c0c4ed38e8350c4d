// SPDX-License-Identifier: Apache-2.0
#include <algorithm>
#include <cstdio>
#include <utility>

#include "human_units.hpp"
#include "report_sections.hpp"

namespace loupe::sinks {
namespace {

constexpr std::size_t kCompactEvents = 3;  // slow calls listed unless verbose

std::string field_text(const FieldValue& v) {
  if (auto p = std::get_if<std::int64_t>(&v)) return std::to_string(*p);
  if (auto p = std::get_if<std::uint64_t>(&v)) return std::to_string(*p);
  if (auto p = std::get_if<double>(&v)) {
    char buf[32];
    std::snprintf(buf, sizeof buf, "%g", *p);
    return buf;
  }
  const std::string& s = std::get<std::string>(v);
  return s.find(' ') == std::string::npos && !s.empty() ? s : "\"" + s + "\"";
}

std::string magnitude_text(const EventMagnitude& m) {
  return m.unit.empty() ? format_number(m.value) : format_quantity(m.value, m.unit);
}

}  // namespace

void render_events(const ProducerRecords& p, const ReportOptions& opt, const TextStyle& style,
                   Blocks& blocks) {
  if (p.events.empty()) return;
  // Each list's title says its count and what ranks it; the table of every name beside
  // another is for verbose mode.
  std::string out;
  TextTable summary({false, true, true, false});
  summary.row({"event", "count", "slowest", "ranked by"});
  for (const auto& [name, log] : p.events) {
    bool ranked = !log.slowest.empty();
    summary.row({name, format_count(log.count),
                 ranked ? magnitude_text(*log.slowest.front().magnitude) : "-",
                 ranked ? log.slowest.front().magnitude->key : "(no duration field)"});
  }
  auto lines = summary.lines("  ");
  for (std::size_t i = 0; i < lines.size(); ++i)
    out += (i == 0 ? style.dim(lines[i]) : lines[i]) + "\n";
  if (opt.verbose) blocks.push_back(std::move(out));

  for (const auto& [name, log] : p.events) {
    bool ranked = !log.slowest.empty();
    std::vector<RankedEvent> shown = ranked ? log.slowest : log.latest_ordered();
    // The one-screen report lists the few slowest; verbose lists `top`.
    const std::size_t rows = opt.verbose ? opt.top : std::min(opt.top, kCompactEvents);
    if (shown.size() > rows) shown.resize(rows);
    std::string title =
        ranked ? "slow calls: " + name + ", " + std::to_string(shown.size()) + " slowest of " +
                     format_count(log.count) + " by " + log.slowest.front().magnitude->key
               : name + ": last " + std::to_string(shown.size()) + " of " + format_count(log.count);
    std::string list = "  " + style.bold(title) + "\n";
    for (const auto& ev : shown) {
      std::string line = "    " + format_clock(ev.event.timestamp_ns);
      if (ev.magnitude) line += "  " + pad_left(magnitude_text(*ev.magnitude), 9);
      for (const auto& [k, v] : ev.labels) line += "  " + k + "=" + v;
      for (const auto& [k, v] : ev.event.fields) {
        if (ev.magnitude && k == ev.magnitude->key) continue;
        std::string text = field_text(v);
        // A field that repeats a label of the record says nothing new.
        if (std::find(ev.labels.begin(), ev.labels.end(), std::make_pair(k, text)) !=
            ev.labels.end())
          continue;
        line += "  " + k + "=" + text;
      }
      list += line + "\n";
      if (!ev.event.frames.empty())
        list += "        " +
                style.dim("stack: " + folded_frames_fit(ev.event.frames,
                                                        opt.width > 60 ? opt.width - 15 : 45)) +
                "\n";
    }
    blocks.push_back(std::move(list));
  }
}

}  // namespace loupe::sinks
