// SPDX-License-Identifier: Apache-2.0
//
// The html report of real runs through the CLI, as a browser shows it: headless Chromium
// runs the page's #selftest at three window widths, searching for a function the workload
// is known to spend its time in. A differential report compares two runs of a workload
// whose CPU time moves from spin_a to spin_b.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <set>
#include <sstream>
#include <string>

#include "cli_run.hpp"
#include "page_selftest.hpp"

namespace {

using loupe::test::PageSelftest;
using loupe::test::RunResult;
using nlohmann::json;

class HtmlE2E : public loupe::test::CliRun {
 protected:
  void SetUp() override {
    CliRun::SetUp();
    if (IsSkipped()) return;
    browser_ = loupe::test::chromium();
    if (browser_.empty()) GTEST_SKIP() << "chromium not installed (scripts/install-deps.sh)";
  }
  // Every check of the page's self-test passes at each width, with no console output.
  std::vector<json> selftest_at_widths(const std::string& page, const std::string& params) {
    std::vector<json> out;
    for (int width : {600, 1200, 1920}) {
      SCOPED_TRACE("window width " + std::to_string(width));
      PageSelftest t = loupe::test::run_page_selftest(browser_, page, params, width, 1200, dir_);
      EXPECT_EQ(t.exit_code, 0) << t.log;
      EXPECT_TRUE(t.ran()) << "the page's self-test did not run:\n"
                           << t.dom.substr(0, 2000) << t.log;
      if (!t.ran()) continue;
      for (const auto& c : t.result["checks"]) EXPECT_TRUE(c["ok"].get<bool>()) << c.dump();
      EXPECT_TRUE(t.result["ok"].get<bool>()) << t.result.dump(2);
      EXPECT_TRUE(t.console_lines().empty()) << t.console_lines().front();
      out.push_back(t.result);
    }
    return out;
  }
  std::string browser_;
};

TEST_F(HtmlE2E, FindingsFirstThenASectionPerProfilerWithSearchableFlameGraphs) {
  // 1 s spinning in spin_half, then 1 s asleep in sleep_half; beside it the blockers (a
  // sleeper, a pipe reader, a vfork), so the off-CPU graph always branches (zoom has a
  // box narrower than the whole whatever the CPU samples were).
  const std::string w = std::string("'") + OFFCPU_WORKLOAD;
  RunResult r =
      run("[[plugins]]\nname = \"cpusample\"\n[[plugins]]\nname = \"offcpu\"\nwakers = false\n"
          "[[sinks]]\nname = \"html\"\n[[sinks]]\nname = \"findings\"\n",
          {"sh", "-c", "\"" + w + "' halves & " + w + "' blockers; wait\""});
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const std::string page = dir_ + "/out/report.html";
  ASSERT_TRUE(std::filesystem::exists(page)) << r.output;
  std::vector<json> results = selftest_at_widths(page, "search=spin_half");
  ASSERT_EQ(results.size(), 3u);
  for (const json& t : results) {
    // The findings rules name spin_half on the CPU and sleep_half off it.
    const std::string checks = t["checks"].dump();
    EXPECT_NE(checks.find("findings at the top"), std::string::npos);
    // cpusample: nearly all of its samples are under spin_half.
    EXPECT_GT(t["share"].get<double>(), 50.0) << t.dump();
    EXPECT_GT(t["labels"]["full"].get<int>(), 3) << t.dump();
  }
  // Labels are fitted, not clipped: every box drawn at 600 px is drawn wider at 1920 px,
  // so each label whole at 600 px is whole at 1920 px too. (Not "cut or hidden at least as
  // many": a wider page also draws boxes under a pixel at 600 px, mostly without labels;
  // under load one run squeezed 2346 labels at 1920 px against 1692 at 600 px.)
  auto whole = [](const json& t) { return t["labels"]["full"].get<int>(); };
  EXPECT_LE(whole(results[0]), whole(results[2])) << results[0]["labels"].dump() << " at 600 px, "
                                                  << results[2]["labels"].dump() << " at 1920 px";

  // The page's data: the profile's order, and the very statements the findings sink wrote
  // from the same records (one library says both).
  const std::string html = loupe::test::slurp(page);
  EXPECT_NE(html.find("\"profilers\":[\"cpusample\",\"offcpu\"]"), std::string::npos);
  EXPECT_LT(html.find("id=\"findings\""), html.find("id=\"profilers\""));
  std::istringstream said(loupe::test::slurp(dir_ + "/out/findings.txt"));
  std::string line;
  ASSERT_TRUE(std::getline(said, line));
  ASSERT_EQ(line, "FINDINGS");
  const std::string open = "<script id=\"loupe-data\" type=\"application/json\">";
  const auto from = html.find(open) + open.size();
  std::string text = html.substr(from, html.find("</script>", from) - from);
  for (std::size_t p; (p = text.find("<\\/")) != std::string::npos;) text.replace(p, 3, "</");
  const json page_findings = json::parse(text)["findings"];
  std::size_t n = 0;
  for (; std::getline(said, line); ++n)
    EXPECT_NE(std::find(page_findings.begin(), page_findings.end(), line), page_findings.end())
        << line << " not in " << page_findings.dump();
  EXPECT_EQ(page_findings.size(), n) << page_findings.dump();
  EXPECT_NE(page_findings.dump().find("is under spin_half"), std::string::npos);

  std::filesystem::create_directories(LOUPE_ARTIFACT_DIR);
  const std::string shot = std::string(LOUPE_ARTIFACT_DIR) + "/sinks_html_e2e_600.png";
  std::system((browser_ + loupe::test::chromium_flags(dir_, 600, 1400) + " --screenshot=" + shot +
               " 'file://" + page + "' > /dev/null 2>&1")
                  .c_str());
}

TEST_F(HtmlE2E, ADifferentialReportColoursWhatGrewRedAndWhatShrankBlue) {
  // Base: 700 ms in spin_a, 250 in spin_b; new: the other way round.
  RunResult base = run("[[plugins]]\nname = \"cpusample\"\n", {SHIFT_WORKLOAD, "700", "250"});
  ASSERT_EQ(base.exit_code, 0) << base.output;
  std::filesystem::rename(dir_ + "/out", dir_ + "/base");
  RunResult next = run("[[plugins]]\nname = \"cpusample\"\n[[sinks]]\nname = \"html\"\nbase = \"" +
                           dir_ + "/base\"\n",
                       {SHIFT_WORKLOAD, "250", "700"});
  ASSERT_EQ(next.exit_code, 0) << next.output;
  const std::string page = dir_ + "/out/report.html";
  std::vector<json> results = selftest_at_widths(page, "search=spin_b");
  ASSERT_EQ(results.size(), 3u);
  for (const json& t : results) {
    const auto grew = t["grew"].get<std::set<std::string>>();
    const auto shrank = t["shrank"].get<std::set<std::string>>();
    // Colours are per box, a box per path: with whole stacks (the default unwinder) a
    // function has a box under each caller path it was seen on, and a box of a few
    // samples may move either way by chance; that spin_a's main box shrank and spin_b's
    // grew is what is judged.
    EXPECT_TRUE(grew.count("spin_b")) << t.dump();
    EXPECT_TRUE(shrank.count("spin_a")) << t.dump();
    // spin_b holds about 700 of 950 ms in the new run.
    EXPECT_GT(t["share"].get<double>(), 55.0) << t.dump();
  }
  const std::string html = loupe::test::slurp(page);
  EXPECT_NE(html.find("\"base\":\"" + dir_ + "/base/records.jsonl\""), std::string::npos);

  std::filesystem::create_directories(LOUPE_ARTIFACT_DIR);
  const std::string shot = std::string(LOUPE_ARTIFACT_DIR) + "/sinks_html_diff.png";
  std::system((browser_ + loupe::test::chromium_flags(dir_, 1200, 900) + " --screenshot=" + shot +
               " 'file://" + page + "' > /dev/null 2>&1")
                  .c_str());
}

}  // namespace
