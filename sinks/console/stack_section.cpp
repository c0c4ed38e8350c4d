// SPDX-License-Identifier: Apache-2.0
#include <algorithm>
#include <array>

#include "human_units.hpp"
#include "report_sections.hpp"

namespace loupe::sinks {
namespace {

// Narrowest room for a stack's frames, however wide the columns before them.
constexpr std::size_t kNarrowestFrames = 40;

std::int64_t first_value(const StackEntry& e) {
  return e.values.empty() ? 0 : e.values[0].value;
}

}  // namespace

void render_stacks(const ProducerRecords& p, const ReportOptions& opt, const TextStyle& style,
                   Blocks& blocks) {
  for (const auto& [name, table_by_key] : p.stacks) {
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
    std::size_t shown = std::min(entries.size(), opt.top);
    std::string out = "  " + style.bold(name) + "  top " + std::to_string(shown) + " of " +
                      format_count(entries.size()) + " stacks by " + vname + ", total " +
                      format_quantity(static_cast<double>(total), vunit) +
                      (opt.after_start && since_start ? ", since the session began" : "") + "\n";

    // The frames take the room the rank, value and share columns leave: labels give way
    // first (elided), then the frames (leaf and caller kept, the rest counted); values
    // beyond the first that do not fit beside them go on a line of their own.
    std::vector<std::array<std::string, 3>> lead;
    std::array<std::size_t, 3> lead_w{1, display_width(vname), 5};
    for (std::size_t i = 0; i < shown; ++i) {
      const StackEntry& e = *entries[i];
      double share =
          total > 0 ? static_cast<double>(first_value(e)) / static_cast<double>(total) : 0;
      lead.push_back({std::to_string(i + 1),
                      format_quantity(static_cast<double>(first_value(e)), vunit),
                      format_percent(share)});
      for (std::size_t c = 0; c < 3; ++c)
        lead_w[c] = std::max(lead_w[c], display_width(lead.back()[c]));
    }
    const std::size_t used = 4 + lead_w[0] + lead_w[1] + lead_w[2] + 6;
    const std::size_t room = opt.width > used + kNarrowestFrames ? opt.width - used
                                                                 : kNarrowestFrames;
    TextTable table({true, true, true, false});
    table.row({"#", vname, "share", "frames (leaf → root)"});
    for (std::size_t i = 0; i < shown; ++i) {
      const StackEntry& e = *entries[i];
      std::string labels =
          e.labels.empty() ? "" : "[" + elide_middle(labels_text(e.labels), room / 3) + "] ";
      // Further values (bytes next to a count, ...) follow the stack they belong to.
      std::string extra;
      for (std::size_t v = 1; v < e.values.size(); ++v)
        extra += "  " + e.values[v].name + "=" +
                 format_quantity(static_cast<double>(e.values[v].value), e.values[v].unit);
      std::size_t left = room - std::min(room, display_width(labels));
      const bool extra_apart = display_width(extra) > left / 3;
      if (!extra_apart) left -= display_width(extra);
      std::string frames = labels + folded_frames_fit(e.frames, std::max(left, room / 2)) +
                           (extra_apart ? "" : extra);
      table.row({lead[i][0], lead[i][1], lead[i][2], frames});
      if (extra_apart && !extra.empty()) table.row({"", "", "", "  " + extra.substr(2)});
    }
    auto lines = table.lines("    ");
    for (std::size_t i = 0; i < lines.size(); ++i)
      out += (i == 0 ? style.dim(lines[i]) : lines[i]) + "\n";
    blocks.push_back(std::move(out));
  }
}

}  // namespace loupe::sinks
