// SPDX-License-Identifier: Apache-2.0
//
// findings sink: short statements of what stands out in the final records, each with the
// numbers it rests on; nothing is said without them. It knows record kinds, never
// plugins, so every profiler's records are read by the same rules (README.md lists them;
// findings_rules.cpp applies them, shared with the html report).
// Written at the final flush to <output_dir>/findings.txt, or stdout with path = "-".
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <optional>
#include <string>
#include <vector>

#include "loupe/report/findings_rules.hpp"
#include "loupe/sdk/plugin.hpp"

namespace loupe::sinks {
namespace {

constexpr loupe_config_key kKeys[] = {
    {"path", LOUPE_CFG_STRING, 0, "\"findings.txt\"",
     "where the statements go (relative to output_dir; \"-\" = stdout)", 0, 0, nullptr, 0, 0},
    {"min_share", LOUPE_CFG_FLOAT, 0, "0.5",
     "dominant function: the share of a stack record's weight it must be under", 0, 0, nullptr, 0,
     0},
    {"tail_ratio", LOUPE_CFG_FLOAT, 0, "10.0", "long tail: p99 at least this many times p50", 0, 0,
     nullptr, 0, 0},
    {"min_self_share", LOUPE_CFG_FLOAT, 0, "0.2",
     "hot spot: the share of a stack record's weight a leaf function must hold by itself", 0, 0,
     nullptr, 0, 0},
    {"min_count", LOUPE_CFG_INT, 0, "20",
     "long tail: histograms with fewer values say nothing; stack records weighed by a count "
     "with a smaller total neither",
     1, 1000000000, nullptr, 0, 0},
};

class FindingsSink : public sdk::Sink {
 public:
  void setup(const sdk::SetupArgs& args) override {
    path_ = args.config.value_string("path");
    report::FindingsOptions opt;
    opt.min_share = args.config.value_float("min_share");
    opt.min_self_share = args.config.value_float("min_self_share");
    opt.tail_ratio = args.config.value_float("tail_ratio");
    opt.min_count = static_cast<std::uint64_t>(args.config.value_int("min_count"));
    rules_.emplace(opt);
    output_dir_ = args.session && args.session->output_dir ? args.session->output_dir : "";
  }

  void consume(const loupe_record& r) override { rules_->add(r); }

  void flush(const sdk::FlushArgs& args) override {
    if (!args.is_final) return;
    std::string text = "FINDINGS\n";
    const std::vector<std::string> said = rules_->statements();
    for (const auto& line : said) text += line + "\n";
    if (said.empty()) text += "nothing stands out by the rules (README.md)\n";
    write(text);
  }

 private:
  void write(const std::string& text) {
    if (path_ == "-") {
      std::fwrite(text.data(), 1, text.size(), stdout);
      std::fflush(stdout);
      return;
    }
    std::string p = path_;
    if (p.empty() || p.front() != '/') p = (output_dir_.empty() ? "" : output_dir_ + "/") + p;
    FILE* f = std::fopen(p.c_str(), "w");
    if (!f)
      throw sdk::Error(LOUPE_ERR_RESOURCE,
                       "findings: cannot write '" + p + "': " + std::strerror(errno));
    std::fwrite(text.data(), 1, text.size(), f);
    std::fclose(f);
  }

  std::string path_, output_dir_;
  std::optional<report::FindingsRules> rules_;
};

}  // namespace
}  // namespace loupe::sinks

LOUPE_SINK(loupe::sinks::FindingsSink, "findings", "0.1.0",
           "statements of what stands out, each with the numbers it rests on", loupe::sinks::kKeys)
