// SPDX-License-Identifier: Apache-2.0
//
// The html sink as the core drives it, and its report as a browser runs it: headless
// Chromium loads the file with #selftest at three window widths (the page checks its own
// flame graphs render with labels that fit, a click zooms, hover explains, search
// highlights, findings come first, and writes the verdict into the DOM), the verdict and
// Chromium's console log are asserted on, and a screenshot is kept as a test artifact.
#include <gtest/gtest.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <regex>
#include <string>
#include <vector>

#include "dl_plugin.hpp"
#include "fake_host.hpp"
#include "page_selftest.hpp"
#include "sample_records.hpp"

namespace loupe::test {
namespace {

using nlohmann::json;

loupe_frame sym(const char* name, loupe_frame_kind kind = LOUPE_FRAME_USER) {
  return loupe_frame{0x1000,
                     name,
                     kind == LOUPE_FRAME_KERNEL ? "[kernel]" : "/usr/bin/app",
                     4,
                     static_cast<std::uint32_t>(kind),
                     kind == LOUPE_FRAME_KERNEL ? LOUPE_RESOLVED_KALLSYMS : LOUPE_RESOLVED_SYMTAB};
}

class HtmlSinkTest : public ::testing::Test {
 protected:
  HtmlSinkTest() : lib_(LOUPE_HTML_SO) { host_.set_output_dir(dir_.path()); }

  void start() { ASSERT_EQ(inst_.setup(host_), LOUPE_OK) << inst_.last_error(); }
  void feed_stack(const char* name, std::vector<loupe_frame> frames, const char* value,
                  const char* unit, std::int64_t v) {
    SampleRecord r(LOUPE_RECORD_STACK_SAMPLE, name);
    r.builder()
        .frames(frames.data(), static_cast<std::uint32_t>(frames.size()))
        .value(value, unit, v);
    ASSERT_EQ(inst_.consume(r.record()), LOUPE_OK) << inst_.last_error();
  }
  void feed_report() {
    feed_stack("cpu", {sym("spin"), sym("work"), sym("main")}, "samples", "count", 70);
    feed_stack("cpu", {sym("parse</script><b>"), sym("main")}, "samples", "count", 25);
    feed_stack("cpu", {sym("copy_user_generic", LOUPE_FRAME_KERNEL), sym("main")}, "samples",
               "count", 5);
    feed_stack("allocs", {sym("malloc"), sym("leaky"), sym("main")}, "alloc_bytes", "bytes",
               4 << 20);
    auto h = latency_histogram();
    ASSERT_EQ(inst_.consume(h.record()), LOUPE_OK);
    auto lost =
        health(LOUPE_HEALTH_WARN, "ring_lost_kernel", "latency/outliers", 17, "reserve failed");
    ASSERT_EQ(inst_.consume(lost.record()), LOUPE_OK);
    auto ok = health(LOUPE_HEALTH_OK, "ring_received", "latency/outliers", 5000);
    ASSERT_EQ(inst_.consume(ok.record()), LOUPE_OK);
    ASSERT_EQ(inst_.flush(true), LOUPE_OK) << inst_.last_error();
  }
  // The JSON the page embeds.
  json embedded() {
    std::string page = read_file(dir_.file("report.html"));
    std::smatch m;
    EXPECT_TRUE(std::regex_search(
        page, m,
        std::regex(R"(<script id="loupe-data" type="application/json">([^]*?)</script>)")));
    std::string text = m[1];
    for (std::size_t p; (p = text.find("<\\/")) != std::string::npos;) text.replace(p, 3, "</");
    return json::parse(text);
  }

  DlPlugin lib_;
  FakeHost host_;
  TempDir dir_;
  PluginInstance inst_{lib_};
};

TEST_F(HtmlSinkTest, ReportIsSelfContainedAndEmbedsEverything) {
  start();
  feed_report();
  std::string page = read_file(dir_.file("report.html"));
  // Works offline: nothing fetched from anywhere.
  EXPECT_EQ(page.find("http://"), std::string::npos);
  EXPECT_EQ(page.find("https://"), std::string::npos);
  EXPECT_EQ(page.find(" src="), std::string::npos);
  EXPECT_EQ(page.find("<link"), std::string::npos);
  // A symbol holding "</script>" does not end the data element early.
  EXPECT_EQ(page.find("parse</script>"), std::string::npos);
  json d = embedded();
  ASSERT_EQ(d["profiles"].size(), 2u);
  EXPECT_EQ(d["profiles"][1]["name"], "cpu");
  EXPECT_EQ(d["profiles"][1]["plugin"], "testplug");
  EXPECT_EQ(d["profiles"][1]["stacks"].size(), 3u);
  EXPECT_EQ(d["profiles"][1]["stacks"][2], json::parse(R"([["main","work","spin"],70])"));
  EXPECT_EQ(d["profiles"][1]["stacks"][0][0][1], "copy_user_generic [k]");
  EXPECT_EQ(d["profiles"][1]["stacks"][1][0][1], "parse</script><b>");
  EXPECT_EQ(d["profiles"][0]["unit"], "bytes");
  ASSERT_EQ(d["histograms"].size(), 1u);
  EXPECT_EQ(d["histograms"][0]["count"], 151);
  EXPECT_EQ(d["histograms"][0]["percentiles"].size(), 5u);
  ASSERT_EQ(d["health"].size(), 2u);
  EXPECT_EQ(d["health"][0]["severity"], "warn");
  // The findings rules' statements, as the findings sink says them.
  const std::string findings = d["findings"].dump();
  EXPECT_NE(findings.find("dominant function: 70 % of testplug/cpu samples (70 of 100) is under "
                          "spin (app)"),
            std::string::npos)
      << findings;
  EXPECT_NE(findings.find("data lost: latency/outliers = 17 (reserve failed)"), std::string::npos)
      << findings;
  EXPECT_EQ(d["base"], "");
  EXPECT_FALSE(d["profiles"][1].contains("base_total"));
  // The flat view, by the rule every report takes functions by: spin runs 70 of 100 itself.
  ASSERT_GE(d["profiles"][1]["functions"].size(), 2u) << d["profiles"][1].dump();
  EXPECT_EQ(d["profiles"][1]["functions"][0][0], "spin");
  EXPECT_DOUBLE_EQ(d["profiles"][1]["functions"][0][1].get<double>(), 0.7);
}

TEST_F(HtmlSinkTest, ABaseThatCannotBeReadFailsSetup) {
  host_.set("base", std::string("/nonexistent/loupe-run"));
  EXPECT_EQ(inst_.setup(host_), LOUPE_ERR_INVALID_ARG);
  EXPECT_NE(inst_.last_error().find("base '/nonexistent/loupe-run' cannot be read"),
            std::string::npos)
      << inst_.last_error();
}

// A base run's records hold null where the symbolizer knew nothing (every CPU run of a
// stripped binary has such frames) and where a figure was NaN: its stacks are read and
// named as the live run names its own, so the same stack meets itself.
TEST_F(HtmlSinkTest, ABaseWithUnsymbolizedFramesMeetsTheLiveRun) {
  const std::string base = dir_.file("base.jsonl");
  {
    std::ofstream out(base);
    out << R"({"schema":"loupe.record/1","kind":"metric","plugin":"testplug","name":"ratio","labels":{},"is_final":true,"window":{"start_ns":1,"end_ns":2},"metric":{"type":"gauge","unit":null,"value":null}})"
        << "\n"
        << R"({"schema":"loupe.record/1","kind":"stack","plugin":"testplug","name":"cpu","labels":{"comm":null},"is_final":true,"window":{"start_ns":1,"end_ns":2},"stack":{"frames":[)"
        << R"({"address":4096,"symbol":null,"module":"/usr/bin/app","offset":64,"kind":"user","resolution":"no_symbol"},)"
        << R"({"address":7,"symbol":null,"module":null,"offset":7,"kind":"user","resolution":"no_module"},)"
        << R"({"address":4100,"symbol":"main","module":"/usr/bin/app","offset":4,"kind":"user","resolution":"symtab"}],)"
        << R"("values":[{"name":"samples","unit":null,"value":10}]}})"
        << "\n";
  }
  host_.set("base", base);
  start();
  feed_stack(
      "cpu",
      {loupe_frame{4096, nullptr, "/usr/bin/app", 64, LOUPE_FRAME_USER, LOUPE_UNRESOLVED_NO_SYMBOL},
       loupe_frame{7, nullptr, nullptr, 7, LOUPE_FRAME_USER, LOUPE_UNRESOLVED_NO_MODULE},
       sym("main")},
      "samples", "count", 30);
  ASSERT_EQ(inst_.flush(true), LOUPE_OK) << inst_.last_error();
  json d = embedded();
  EXPECT_EQ(d["base"], base);
  ASSERT_EQ(d["profiles"].size(), 1u);
  EXPECT_EQ(d["profiles"][0]["base_total"], 10);
  EXPECT_EQ(d["profiles"][0]["stacks"][0],
            json::parse(R"([["main","[unknown]","app+0x40"],30,10])"));
}

TEST_F(HtmlSinkTest, HeadlessChromiumRendersZoomsSearchesAndLogsNoErrors) {
  std::string browser = chromium();
  if (browser.empty())
    GTEST_SKIP() << "chromium not installed (scripts/install-deps.sh installs it)";
  start();
  feed_report();
  const std::string page = dir_.file("report.html");
  for (int width : {600, 1200, 1920}) {
    SCOPED_TRACE("window width " + std::to_string(width));
    PageSelftest t = run_page_selftest(browser, page, "search=spin", width, 1400, dir_.path());
    ASSERT_EQ(t.exit_code, 0) << t.log;
    ASSERT_TRUE(t.ran()) << "the page's self-test did not run:\n" << t.dom.substr(0, 2000) << t.log;
    for (const auto& c : t.result["checks"]) EXPECT_TRUE(c["ok"].get<bool>()) << c.dump();
    EXPECT_TRUE(t.result["ok"].get<bool>()) << t.result.dump(2);
    EXPECT_NE(t.dom.find("<title>selftest:ok</title>"), std::string::npos);
    // spin is 70 of the cpu graph's 100 samples.
    EXPECT_DOUBLE_EQ(t.result["share"].get<double>(), 70.0) << t.result.dump();
    EXPECT_TRUE(t.console_lines().empty()) << t.console_lines().front();
  }

  std::filesystem::create_directories(LOUPE_ARTIFACT_DIR);
  const std::string shot = std::string(LOUPE_ARTIFACT_DIR) + "/sinks_html_report.png";
  std::filesystem::remove(shot);
  int rc = std::system((browser + chromium_flags(dir_.path(), 1280, 1400) +
                        " --screenshot=" + shot + " 'file://" + page + "' > /dev/null 2>&1")
                           .c_str());
  ASSERT_EQ(rc, 0);
  ASSERT_TRUE(std::filesystem::exists(shot));
  EXPECT_GT(std::filesystem::file_size(shot), 10000u) << "a blank page would be smaller";
}

TEST_F(HtmlSinkTest, IntervalRecordsAreLeftOutButHealthIsKept) {
  start();
  SampleRecord r(LOUPE_RECORD_STACK_SAMPLE, "cpu");
  loupe_frame f = sym("a");
  r.builder().frames(&f, 1).value("samples", "count", 9);
  ASSERT_EQ(inst_.consume(r.record(/*is_final=*/false)), LOUPE_OK);
  auto lost = health(LOUPE_HEALTH_WARN, "ring_lost_kernel", "x", 3);
  ASSERT_EQ(inst_.consume(lost.record(/*is_final=*/false)), LOUPE_OK);
  ASSERT_EQ(inst_.flush(false), LOUPE_OK);
  json d = embedded();
  EXPECT_TRUE(d["profiles"].empty());
  EXPECT_EQ(d["health"].size(), 1u);
}

}  // namespace
}  // namespace loupe::test
