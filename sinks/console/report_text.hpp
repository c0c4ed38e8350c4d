// SPDX-License-Identifier: Apache-2.0
#ifndef LOUPE_SINKS_CONSOLE_REPORT_TEXT_HPP
#define LOUPE_SINKS_CONSOLE_REPORT_TEXT_HPP

#include <cstddef>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace loupe::sinks {

struct ReportOptions {
  std::size_t top = 10;
  std::size_t bar_width = 40;
  bool color = false;
  bool verbose = false;  // every zero, every health check, percentile bounds
  // An interval report: its health is the session's so far.
  bool interval = false;
  // Its window begins after the session's: a section that holds values since the session
  // began (a gauge, a stack sample) says so.
  bool after_start = false;
  // Columns a report line may take: tables split their columns, labels and stacks are
  // elided (saying so) and prose lines wrap, so nothing is cut off unsaid.
  std::size_t width = 120;
  // Histograms drawn unless verbose (then `top` of each name): the busiest, so many of a
  // name and so many in a producer's section (biolat has five names); the pivot table above
  // has every row's p50, p99 and max, and the others are counted on a line per name.
  std::size_t drawn_per_name = 3;
  std::size_t drawn_per_section = 4;
  // Lines a report at the defaults may take (0: no bound). Past it, tables and stack lists
  // show fewer rows and fewer histograms are drawn, each cut counted as always.
  std::size_t lines = 60;
  // Said above the verdict when the report was cut to `lines`.
  std::string fit_note;
  // A cut report keeps each stack profiler's primary view (its flat table and first stack
  // table) and drops the secondary ones (per-CPU and per-process tables, histograms,
  // blockers, wakers), counting them, before any table loses rows.
  bool primary_only = false;
};

// ANSI emphasis, or nothing when the output is not a terminal (or color = "never").
class TextStyle {
 public:
  explicit TextStyle(bool color) : color_(color) {}
  std::string bold(std::string_view s) const { return wrap("\033[1m", s); }
  std::string dim(std::string_view s) const { return wrap("\033[2m", s); }
  std::string warn(std::string_view s) const { return wrap("\033[1;33m", s); }
  std::string error(std::string_view s) const { return wrap("\033[1;31m", s); }
  std::string good(std::string_view s) const { return wrap("\033[1;32m", s); }

 private:
  std::string wrap(const char* code, std::string_view s) const {
    if (!color_) return std::string(s);
    return std::string(code) + std::string(s) + "\033[0m";
  }
  bool color_;
};

// Columns are counted in code points so "µs", "∞" and "…" align like ASCII.
inline std::size_t display_width(std::string_view s) {
  std::size_t n = 0;
  for (unsigned char c : s)
    if ((c & 0xC0) != 0x80) ++n;
  return n;
}
// Columns on screen: ANSI escape sequences take none.
inline std::size_t visible_width(std::string_view s) {
  std::size_t n = 0;
  for (std::size_t i = 0; i < s.size(); ++i) {
    if (s[i] == '\033') {
      while (i + 1 < s.size() && !(s[i + 1] >= '@' && s[i + 1] <= '~' && s[i + 1] != '[')) ++i;
      ++i;
      continue;
    }
    if ((static_cast<unsigned char>(s[i]) & 0xC0) != 0x80) ++n;
  }
  return n;
}
// Byte offset of column `column` in a string without escape sequences.
inline std::size_t column_offset(std::string_view s, std::size_t column) {
  std::size_t n = 0, i = 0;
  for (; i < s.size(); ++i) {
    if ((static_cast<unsigned char>(s[i]) & 0xC0) != 0x80) {
      if (n == column) return i;
      ++n;
    }
  }
  return s.size();
}
// `s` in at most `width` columns: its start and its end (a path's file name, a symbol's
// last component) stay readable and a "…" says what was taken out of the middle.
inline std::string elide_middle(std::string_view s, std::size_t width) {
  const std::size_t w = display_width(s);
  if (w <= width) return std::string(s);
  if (width == 0) return "";
  const std::size_t head = (width - 1) / 2, tail = width - 1 - head;
  return std::string(s.substr(0, column_offset(s, head))) + "…" +
         std::string(s.substr(column_offset(s, w - tail)));
}
// A line wider than `width` as several: broken after the last separator ("  ", ", ", " ")
// that fits, the continuation indented four columns past the line's own indent. Nothing
// is dropped; a line without separators breaks where it must.
inline std::vector<std::string> wrap_line(const std::string& line, std::size_t width) {
  std::vector<std::string> out;
  if (width < 16 || visible_width(line) <= width) return {line};
  const std::size_t indent = line.find_first_not_of(' ');
  const std::string more((indent == std::string::npos ? 0 : indent) + 4, ' ');
  std::string rest = line;
  bool first = true;
  while (visible_width(rest) > width) {
    // Escape sequences are rare here (color); measuring bytes of an escaped line only
    // breaks it earlier than needed.
    const std::size_t limit = column_offset(rest, width);
    std::size_t cut = std::string::npos;
    const std::size_t from = (first ? 0 : more.size()) + 1;
    for (const char* sep : {"  ", ", ", " "}) {
      std::size_t at = rest.rfind(sep, limit - std::string_view(sep).size());
      if (at != std::string::npos && at >= from && at + std::string_view(sep).size() <= limit) {
        cut = at + std::string_view(sep).size();
        break;
      }
    }
    if (cut == std::string::npos) cut = limit;
    std::string head = rest.substr(0, cut);
    while (!head.empty() && head.back() == ' ') head.pop_back();
    out.push_back(head);
    std::size_t next = rest.find_first_not_of(' ', cut);
    rest = more + (next == std::string::npos ? "" : rest.substr(next));
    first = false;
  }
  if (rest.find_first_not_of(' ') != std::string::npos) out.push_back(rest);
  return out;
}
inline std::string pad_right(std::string s, std::size_t width) {
  std::size_t w = display_width(s);
  if (w < width) s.append(width - w, ' ');
  return s;
}
inline std::string pad_left(std::string s, std::size_t width) {
  std::size_t w = display_width(s);
  if (w < width) s.insert(0, width - w, ' ');
  return s;
}
// The first `columns` columns of a line, ANSI escape sequences kept whole and not counted,
// so that a line wider than a terminal is cut instead of wrapping onto the next row.
inline std::string fit_width(std::string_view line, std::size_t columns) {
  std::string out;
  std::size_t shown = 0;
  bool escapes = false;
  for (std::size_t i = 0; i < line.size();) {
    if (line[i] == '\033') {
      std::size_t end = i + 1;
      while (end < line.size() && !(line[end] >= '@' && line[end] <= '~' && line[end] != '['))
        ++end;
      out.append(line.substr(i, end + 1 - i));
      escapes = true;
      i = end + 1;
      continue;
    }
    std::size_t len = 1;
    while (i + len < line.size() && (static_cast<unsigned char>(line[i + len]) & 0xC0) == 0x80)
      ++len;
    if (shown == columns) {
      if (escapes) out += "\033[0m";
      break;
    }
    out.append(line.substr(i, len));
    ++shown;
    i += len;
  }
  return out;
}
// "── title ─────" to `width` columns.
inline std::string rule(std::string_view title, std::size_t width, const char* ch = "─") {
  std::string out = std::string(ch) + ch + " " + std::string(title) + " ";
  for (std::size_t w = display_width(out); w < width; ++w) out += ch;
  return out;
}

// A table whose columns are sized to their widest cell. lines() returns padded rows so
// callers can wrap a whole row in emphasis without escape codes breaking the widths.
class TextTable {
 public:
  explicit TextTable(std::vector<bool> right_aligned) : right_(std::move(right_aligned)) {}
  void row(std::vector<std::string> cells) { rows_.push_back(std::move(cells)); }
  std::vector<std::string> lines(std::string_view indent) const {
    std::vector<std::size_t> widths;
    for (const auto& r : rows_)
      for (std::size_t i = 0; i < r.size(); ++i) {
        if (widths.size() <= i) widths.push_back(0);
        if (display_width(r[i]) > widths[i]) widths[i] = display_width(r[i]);
      }
    std::vector<std::string> out;
    for (const auto& r : rows_) {
      std::string line(indent);
      for (std::size_t i = 0; i < r.size(); ++i) {
        bool right = i < right_.size() && right_[i];
        bool last = i + 1 == r.size();
        if (i) line += "  ";
        line += right ? pad_left(r[i], widths[i]) : last ? r[i] : pad_right(r[i], widths[i]);
      }
      while (!line.empty() && line.back() == ' ') line.pop_back();
      out.push_back(std::move(line));
    }
    return out;
  }

 private:
  std::vector<bool> right_;
  std::vector<std::vector<std::string>> rows_;
};

}  // namespace loupe::sinks

#endif
