// SPDX-License-Identifier: Apache-2.0
//
// html sink: one self-contained report file — the findings first, then a section per
// profiler with interactive flame graphs and histograms, and the health summary — that
// works offline and can be attached to a ticket. Pointed at an earlier run (`base`), its
// flame graphs are differential: this run's widths, coloured by the change.
#include <optional>
#include <string>
#include <vector>

#include "base_run.hpp"
#include "loupe/sdk/atomic_file.hpp"
#include "loupe/sdk/plugin.hpp"
#include "report_data.hpp"
#include "report_page.hpp"

namespace loupe::sinks {
namespace {

constexpr loupe_config_key kKeys[] = {
    {"path", LOUPE_CFG_STRING, 0, "\"report.html\"", "the report file (relative to output_dir)", 0,
     0, nullptr, 0, 0},
    {"title", LOUPE_CFG_STRING, 0, "\"\"",
     "page title; empty = \"loupe report\" with the target command", 0, 0, nullptr, 0, 0},
    {"value", LOUPE_CFG_STRING, 0, "\"\"",
     "which value of each stack record weighs the flame graph (e.g. \"alloc_bytes\"); empty = the "
     "first",
     0, 0, nullptr, 0, 0},
    {"final_only", LOUPE_CFG_BOOL, 0, "true",
     "show only end-of-session records (interval reports are often cumulative snapshots)", 0, 0,
     nullptr, 0, 0},
    {"base", LOUPE_CFG_STRING, 0, "\"\"",
     "an earlier run to compare with (its records.jsonl or output directory): flame graphs "
     "become differential (red = grew, blue = shrank); empty = none",
     0, 0, nullptr, 0, 0},
};

class HtmlSink : public sdk::Sink {
 public:
  void setup(const sdk::SetupArgs& args) override {
    std::string dir = args.session && args.session->output_dir ? args.session->output_dir : "";
    path_ = sdk::join_path(dir, args.config.value_string("path"));
    title_ = args.config.value_string("title");
    if (title_.empty()) {
      title_ = "loupe report";
      if (args.session && args.session->target_command)
        title_ += std::string(": ") + args.session->target_command;
    }
    final_only_ = args.config.value_bool("final_only");
    data_.emplace(args.config.value_string("value"));
    if (args.session && LOUPE_ABI_HAS_FIELD(args.session, loupe_session_info, n_profilers))
      for (std::uint32_t i = 0; i < args.session->n_profilers && args.session->profilers; ++i)
        if (args.session->profilers[i]) profilers_.emplace_back(args.session->profilers[i]);
    // Read at setup, not at the end: a wrong path fails the run before anything is measured.
    if (std::string base = args.config.value_string("base"); !base.empty()) {
      base_.emplace(args.config.value_string("value"));
      base_label_ = load_base_run(base, *base_);
    }
  }

  void consume(const loupe_record& rec) override {
    // Health is always shown: losses reported in an interval are still losses.
    if (final_only_ && !rec.is_final && rec.kind != LOUPE_RECORD_HEALTH) return;
    data_->add(rec);
  }

  void flush(const sdk::FlushArgs&) override {
    sdk::replace_file(path_, render_report_page(data_->to_json(
                                 title_, profilers_, base_ ? &*base_ : nullptr, base_label_)));
  }

 private:
  std::string path_;
  std::string title_;
  bool final_only_ = true;
  std::optional<ReportData> data_;
  std::optional<ReportData> base_;
  std::string base_label_;
  std::vector<std::string> profilers_;
};

}  // namespace
}  // namespace loupe::sinks

LOUPE_SINK(loupe::sinks::HtmlSink, "html", "1.0.0",
           "one self-contained HTML report: findings, flame graphs (or differential ones against a "
           "base run), histograms, health",
           loupe::sinks::kKeys)
