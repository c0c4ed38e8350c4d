// SPDX-License-Identifier: Apache-2.0
//
// console sink: a human report. Records are buffered and rendered at flush(), one section
// per producer in profile order: an interval section for every periodic flush (redrawn in
// place on a terminal, like `perf top`), the full report with its health verdict at the end.
#include <sys/ioctl.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <memory>
#include <string>
#include <vector>

#include "human_units.hpp"
#include "interval_deltas.hpp"
#include "loupe/sdk/output_file.hpp"
#include "loupe/sdk/plugin.hpp"
#include "report_batch.hpp"
#include "report_sections.hpp"

namespace loupe::sinks {
namespace {

constexpr const char* kColorChoices[] = {"auto", "always", "never", nullptr};
// Clear the screen and home the cursor: a live frame replaces the one before it.
constexpr const char* kClearScreen = "\033[H\033[2J";

constexpr loupe_config_key kKeys[] = {
    {"path", LOUPE_CFG_STRING, 0, "\"-\"",
     "report file, relative to the session output_dir; \"-\" = stdout", 0, 0, nullptr, 0, 0},
    {"top", LOUPE_CFG_INT, 0, "10",
     "rows of every table, stack list and slow-event list; histograms drawn per name at most", 1,
     1000, nullptr, 0, 0},
    {"bar_width", LOUPE_CFG_INT, 0, "40", "width of histogram bars in columns", 10, 200, nullptr, 0,
     0},
    {"color", LOUPE_CFG_STRING, 0, "\"auto\"",
     "ANSI colors: \"auto\" (when writing to a terminal), \"always\" or \"never\"", 0, 0, nullptr,
     0, 0, kColorChoices},
    {"verbose", LOUPE_CFG_BOOL, 0, "false",
     "show zero columns and rows, every health check, histogram sums and percentile bounds", 0, 0,
     nullptr, 0, 0},
    {"width", LOUPE_CFG_INT, 0, "120",
     "columns of a report line: wider tables are split, labels and stacks elided, text wrapped", 40,
     10000, nullptr, 0, 0},
    {"lines", LOUPE_CFG_INT, 0, "60",
     "lines a report may take unless verbose: past it tables show fewer rows and fewer histograms "
     "are drawn (each cut counted); 0 = no bound",
     0, 100000, nullptr, 0, 0},
    {"live", LOUPE_CFG_BOOL, 0, "true",
     "with a session interval and a terminal, redraw the interval report in place", 0, 0, nullptr,
     0, 0},
};

std::uint64_t wall_now_ns() {
  timespec ts{};
  ::clock_gettime(CLOCK_REALTIME, &ts);
  return static_cast<std::uint64_t>(ts.tv_sec) * 1000000000ull +
         static_cast<std::uint64_t>(ts.tv_nsec);
}

// The terminal's size, 0 x 0 when unknown.
winsize terminal_size(int fd) {
  winsize ws{};
  if (::ioctl(fd, TIOCGWINSZ, &ws) != 0) ws = {};
  return ws;
}

class ConsoleSink : public sdk::Sink {
 public:
  void setup(const sdk::SetupArgs& args) override {
    // Ranges, choices and defaults are the schema's: the host validated them already.
    opt_.top = static_cast<std::size_t>(args.config.value_int("top"));
    opt_.bar_width = static_cast<std::size_t>(args.config.value_int("bar_width"));
    opt_.verbose = args.config.value_bool("verbose");
    opt_.width = static_cast<std::size_t>(args.config.value_int("width"));
    opt_.lines = static_cast<std::size_t>(args.config.value_int("lines"));
    std::string color = args.config.value_string("color");
    const loupe_session_info* session = args.session;
    const char* dir = session ? session->output_dir : nullptr;
    out_ = std::make_unique<sdk::OutputFile>(args.config.value_string("path"), dir, "console");
    const bool tty = ::isatty(out_->fd()) == 1;
    opt_.color = color == "always" || (color == "auto" && tty);
    live_ = tty && args.config.value_bool("live") && session && session->interval_s > 0;
    if (session) {
      start_wall_ns_ = session->start_wall_ns;
      interval_s_ = session->interval_s;
      if (LOUPE_ABI_HAS_FIELD(session, loupe_session_info, n_profilers))
        for (std::uint32_t i = 0; i < session->n_profilers && session->profilers; ++i)
          if (session->profilers[i]) profile_order_.emplace_back(session->profilers[i]);
    }
    report_start_ns_ = start_wall_ns_;
    batch_ = std::make_unique<ReportBatch>(opt_.top, start_wall_ns_);
  }

  void consume(const loupe_record& rec) override {
    batch_->add(rec);
    // The final report's event lists cover the session, not its last interval.
    if (rec.kind == LOUPE_RECORD_EVENT && rec.event && interval_s_ > 0)
      session_events_[rec.plugin ? rec.plugin : ""][copy_str(rec.name)].add(
          RankedEvent{copy_labels(rec), copy_event(*rec.event), std::nullopt}, opt_.top);
  }

  void flush(const sdk::FlushArgs& args) override {
    std::string text;
    const std::uint64_t end = batch_->window_end_ns ? batch_->window_end_ns : wall_now_ns();
    if (args.is_final) {
      settle_final_events();
      // Appended below the last live frame, not drawn over it: whatever the target printed
      // meanwhile stays on the screen.
      text = render("loupe report", true, start_wall_ns_, end);
    } else {
      // Every section of an interval report counts the interval.
      deltas_.apply(*batch_);
      if (live_) {
        text = live_frame(end);
      } else if (!batch_->empty()) {
        text = render("loupe interval #" + std::to_string(++interval_) + every(), false,
                      report_start_ns_, end);
      }
      report_start_ns_ = end;
    }
    batch_ = std::make_unique<ReportBatch>(opt_.top, start_wall_ns_);
    // An interval with nothing to say stays silent; the final report always prints,
    // since its health verdict is the answer to "can I trust this?".
    if (!text.empty()) out_->write(text);
  }

 private:
  // One screen: what arrived in this interval, cut to the terminal's size so that nothing
  // wraps and the header never scrolls away; the final report has everything.
  std::string live_frame(std::uint64_t end) {
    ++interval_;
    std::string title = "loupe interval #" + std::to_string(interval_);
    if (start_wall_ns_) title += " · " + format_span(start_wall_ns_, end) + " elapsed";
    std::string page = render(title + every(), false, report_start_ns_, end);
    if (batch_->empty()) page += "  nothing arrived in this interval\n";
    std::vector<std::string> lines;
    for (std::size_t at = 0; at < page.size();) {
      std::size_t nl = page.find('\n', at);
      if (nl == std::string::npos) nl = page.size();
      lines.push_back(page.substr(at, nl - at));
      at = nl + 1;
    }
    const winsize ws = terminal_size(out_->fd());
    // The first line of a report is blank (it separates appended reports): not on a screen.
    if (!lines.empty() && lines.front().empty()) lines.erase(lines.begin());
    const std::size_t room = ws.ws_row > 1 ? ws.ws_row - 1u : lines.size();
    std::string frame = kClearScreen;
    for (std::size_t i = 0; i < lines.size() && i < room; ++i) {
      std::string line = lines[i];
      if (i + 1 == room && lines.size() > room)
        line = "  … " + std::to_string(lines.size() - i) + " more lines: the final report has them";
      frame += (ws.ws_col ? fit_width(line, ws.ws_col) : line) + "\n";
    }
    return frame;
  }

  std::string every() const {
    return interval_s_ > 0 ? " · every " + format_quantity(interval_s_ * 1e9, "ns") : "";
  }

  // The events of the whole session for the final report, where no event of a name came
  // with the final report itself (a producer that restates its events there, as a
  // snapshot, has its own list).
  void settle_final_events() {
    for (auto& [producer, by_name] : session_events_) {
      auto [it, added] = batch_->producers.try_emplace(producer);
      if (added) batch_->arrival.push_back(producer);
      for (auto& [name, log] : by_name) {
        auto have = it->second.events.find(name);
        if (have == it->second.events.end() || !have->second.any_final)
          it->second.events[name] = std::move(log);
      }
    }
    session_events_.clear();
  }

  // The report's title says which window every section counts: the whole session (the
  // final report) or the interval since the previous report.
  std::string render(const std::string& title, bool is_final, std::uint64_t from,
                     std::uint64_t to) {
    ReportOptions opt = opt_;
    opt.interval = !is_final;
    // The first interval report begins with the session: its totals are its own.
    opt.after_start = !is_final && from > start_wall_ns_;
    std::string text = render_with(opt, title, is_final, from, to);
    if (opt.verbose || opt.lines == 0) return text;
    // One screen at the defaults: each step shows fewer rows and draws fewer histograms
    // until the report fits (or nothing is left to cut); every table still counts what it
    // left out, and the note says how to see it all.
    // A stack profiler's secondary tables go before any primary table loses rows.
    struct Step {
      std::size_t top, per_name, per_section;
      bool primary_only;
    };
    constexpr Step kSteps[] = {{SIZE_MAX, 1, 2, false}, {SIZE_MAX, 1, 2, true}, {7, 1, 1, true},
                               {5, 1, 1, true},         {5, 0, 0, true},        {3, 0, 0, true},
                               {2, 0, 0, true},         {1, 0, 0, true}};
    for (const Step& step : kSteps) {
      if (count_lines(text) <= opt.lines) break;
      ReportOptions cut = opt;
      cut.top = std::min(opt.top, step.top);
      cut.drawn_per_name = std::min(opt.drawn_per_name, step.per_name);
      cut.drawn_per_section = std::min(opt.drawn_per_section, step.per_section);
      cut.primary_only = step.primary_only;
      cut.fit_note = "(cut to " + std::to_string(opt.lines) + " lines: " + std::to_string(cut.top) +
                     " rows a table, histograms drawn " + std::to_string(cut.drawn_per_name) +
                     " a name and " + std::to_string(cut.drawn_per_section) +
                     " a section; console lines = 0 shows all)";
      text = render_with(cut, title, is_final, from, to);
    }
    return text;
  }

  static std::size_t count_lines(const std::string& text) {
    return static_cast<std::size_t>(std::count(text.begin(), text.end(), '\n'));
  }

  std::string render_with(const ReportOptions& opt, const std::string& title, bool is_final,
                          std::uint64_t from, std::uint64_t to) {
    TextStyle style(opt.color);
    const ReportBatch& b = *batch_;
    std::string head = title + (is_final ? " · whole session" : " · this interval");
    if (from && to > from)
      head +=
          " " + format_clock(from) + " → " + format_clock(to) + " (" + format_span(from, to) + ")";
    head += " · " + format_count(b.n_records()) + " records";
    std::string out = "\n" + style.bold(rule(head, report_width(opt), "█")) + "\n";

    // Profile order first; producers the profile does not list (the host's own records,
    // an older host without the list) in the order they arrived.
    std::vector<std::string> order = profile_order_;
    for (const auto& p : b.arrival)
      if (std::find(order.begin(), order.end(), p) == order.end()) order.push_back(p);
    for (const auto& name : order) {
      auto it = b.producers.find(name);
      if (it == b.producers.end() || !it->second.has_data()) continue;
      Blocks blocks;
      std::string headline;
      if (opt.primary_only && !it->second.stacks.empty()) {
        // A stack profiler cut to fit: its stacks are the answer; its tables, histograms
        // and events are counted, not shown.
        Blocks secondary;
        render_metrics(it->second, opt, style, secondary, headline);
        render_histograms(it->second, opt, style, secondary);
        render_events(it->second, opt, style, secondary);
        render_stacks(it->second, opt, style, blocks);
        if (!secondary.empty())
          blocks.push_back("  " +
                           style.dim("… " + std::to_string(secondary.size()) +
                                     " table(s) and histogram(s) left out to fit "
                                     "(console lines = 0 shows them)") +
                           "\n");
      } else {
        render_metrics(it->second, opt, style, blocks, headline);
        render_histograms(it->second, opt, style, blocks);
        render_stacks(it->second, opt, style, blocks);
        render_events(it->second, opt, style, blocks);
      }
      std::string heading = name.empty() ? "(unnamed)" : name;
      // The headline joins the heading when it fits the rule, else it leads the section.
      if (!headline.empty() && display_width(heading + headline) + 12 <= report_width(opt))
        heading += " · " + headline;
      else if (!headline.empty())
        blocks.insert(blocks.begin(), "  " + headline + "\n");
      // The profiler's own findings lead its section: what stands out, with its figures.
      if (!it->second.findings.empty()) {
        auto said = it->second.findings;
        std::stable_sort(said.begin(), said.end(),
                         [](const auto& x, const auto& y) { return x.first > y.first; });
        std::string block;
        for (const auto& [weight, line] : said) block += "  " + style.bold("» " + line) + "\n";
        blocks.insert(blocks.begin(), block);
      }
      out += "\n" + style.bold(rule(heading, report_width(opt), "═")) + "\n";
      for (std::size_t i = 0; i < blocks.size(); ++i) out += (i ? "\n" : "") + blocks[i];
    }
    if (!opt.fit_note.empty()) out += "\n  " + style.dim(opt.fit_note) + "\n";
    Blocks health;
    render_health(b, opt, style, health);
    for (const auto& block : health) out += "\n" + block;
    return fit_lines(out, opt.width);
  }

  // Sections lay their tables and stacks out to the width; whatever line is still wider
  // (a long verdict, an event's fields) wraps instead of running off the screen.
  static std::string fit_lines(const std::string& text, std::size_t width) {
    std::string out;
    for (std::size_t at = 0; at < text.size();) {
      std::size_t nl = text.find('\n', at);
      if (nl == std::string::npos) nl = text.size();
      for (const auto& line : wrap_line(text.substr(at, nl - at), width)) out += line + "\n";
      at = nl + 1;
    }
    if (!text.empty() && text.back() != '\n') out.pop_back();
    return out;
  }

  ReportOptions opt_;
  std::unique_ptr<sdk::OutputFile> out_;
  std::unique_ptr<ReportBatch> batch_;
  IntervalDeltas deltas_;
  // Events of the session so far, by producer and name, for the final report.
  std::map<std::string, std::map<std::string, EventLog>> session_events_;
  std::uint64_t report_start_ns_ = 0;  // where the next interval report's window begins
  std::vector<std::string> profile_order_;
  std::uint64_t start_wall_ns_ = 0;
  double interval_s_ = 0;
  bool live_ = false;
  unsigned interval_ = 0;
};

}  // namespace
}  // namespace loupe::sinks

LOUPE_SINK(
    loupe::sinks::ConsoleSink, "console", "1.1.0",
    "human report per profiler: pivoted metrics, histograms, top stacks, slow events, health",
    loupe::sinks::kKeys)
