// SPDX-License-Identifier: Apache-2.0
#include <algorithm>

#include "human_units.hpp"
#include "report_sections.hpp"

namespace loupe::sinks {
namespace {

constexpr std::size_t kMaxFoldedFrames = 16;

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

    TextTable table({true, true, true, false});
    table.row({"#", vname, "share", "frames (leaf → root)"});
    for (std::size_t i = 0; i < shown; ++i) {
      const StackEntry& e = *entries[i];
      double share =
          total > 0 ? static_cast<double>(first_value(e)) / static_cast<double>(total) : 0;
      std::string frames = folded_frames(e.frames, kMaxFoldedFrames);
      if (!e.labels.empty()) frames = "[" + labels_text(e.labels) + "] " + frames;
      // Further values (bytes next to a count, ...) follow the stack they belong to.
      for (std::size_t v = 1; v < e.values.size(); ++v)
        frames += "  " + e.values[v].name + "=" +
                  format_quantity(static_cast<double>(e.values[v].value), e.values[v].unit);
      table.row({std::to_string(i + 1), format_quantity(static_cast<double>(first_value(e)), vunit),
                 format_percent(share), frames});
    }
    auto lines = table.lines("    ");
    for (std::size_t i = 0; i < lines.size(); ++i)
      out += (i == 0 ? style.dim(lines[i]) : lines[i]) + "\n";
    blocks.push_back(std::move(out));
  }
}

}  // namespace loupe::sinks
