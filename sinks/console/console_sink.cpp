// SPDX-License-Identifier: Apache-2.0
//
// console sink: a human report. Records are buffered and rendered at flush(): an interval
// section for every periodic flush, the full report with its health verdict at the end.
#include <unistd.h>

#include <memory>
#include <string>

#include "human_units.hpp"
#include "loupe/sdk/output_file.hpp"
#include "loupe/sdk/plugin.hpp"
#include "report_batch.hpp"
#include "report_sections.hpp"

namespace loupe::sinks {
namespace {

constexpr const char* kColorChoices[] = {"auto", "always", "never", nullptr};

constexpr loupe_config_key kKeys[] = {
    {"path", LOUPE_CFG_STRING, 0, "\"-\"",
     "report file, relative to the session output_dir; \"-\" = stdout", 0, 0, nullptr, 0, 0},
    {"top", LOUPE_CFG_INT, 0, "10", "rows in top-N stack tables and slow-event lists", 1, 1000,
     nullptr, 0, 0},
    {"bar_width", LOUPE_CFG_INT, 0, "40", "width of histogram bars in columns", 10, 200, nullptr, 0,
     0},
    {"color", LOUPE_CFG_STRING, 0, "\"auto\"",
     "ANSI colors: \"auto\" (when writing to a terminal), \"always\" or \"never\"", 0, 0, nullptr,
     0, 0, kColorChoices},
};

class ConsoleSink : public sdk::Sink {
 public:
  void setup(const sdk::SetupArgs& args) override {
    // Ranges, choices and defaults are the schema's: the host validated them already.
    opt_.top = static_cast<std::size_t>(args.config.value_int("top"));
    opt_.bar_width = static_cast<std::size_t>(args.config.value_int("bar_width"));
    std::string color = args.config.value_string("color");
    const char* dir = args.session ? args.session->output_dir : nullptr;
    out_ = std::make_unique<sdk::OutputFile>(args.config.value_string("path"), dir, "console");
    opt_.color = color == "always" || (color == "auto" && ::isatty(out_->fd()) == 1);
    batch_ = std::make_unique<ReportBatch>(opt_.top);
  }

  void consume(const loupe_record& rec) override { batch_->add(rec); }

  void flush(const sdk::FlushArgs& args) override {
    // An interval with nothing to say stays silent; the final report always prints, since
    // its health verdict is the answer to "can I trust this?".
    if (!args.is_final && batch_->empty()) return;
    std::string text = render(args.is_final);
    batch_ = std::make_unique<ReportBatch>(opt_.top);
    out_->write(text);
  }

 private:
  std::string render(bool is_final) {
    TextStyle style(opt_.color);
    const ReportBatch& b = *batch_;
    std::string title =
        is_final ? "loupe report" : "loupe interval #" + std::to_string(++interval_);
    std::string out = "\n" + style.bold(rule(title, report_width(opt_), "█")) + "\n";
    std::string info = "  records " + format_count(b.n_records());
    if (b.window_end_ns)
      info += "   window " + format_clock(b.window_start_ns) + " → " +
              format_clock(b.window_end_ns) + " (" +
              format_span(b.window_start_ns, b.window_end_ns) + ")";
    if (!b.sources.empty()) {
      info += "   from ";
      bool first = true;
      for (const auto& s : b.sources) {
        info += (first ? "" : ", ") + s;
        first = false;
      }
    }
    out += info + "\n\n";
    render_histograms(b, opt_, style, out);
    render_metrics(b, opt_, style, out);
    render_stacks(b, opt_, style, out);
    render_events(b, opt_, style, out);
    render_health(b, opt_, style, out);
    return out;
  }

  ReportOptions opt_;
  std::unique_ptr<sdk::OutputFile> out_;
  std::unique_ptr<ReportBatch> batch_;
  unsigned interval_ = 0;
};

}  // namespace
}  // namespace loupe::sinks

LOUPE_SINK(loupe::sinks::ConsoleSink, "console", "1.0.0",
           "human report: histograms with percentiles, metrics, top stacks, slow events, health",
           loupe::sinks::kKeys)
