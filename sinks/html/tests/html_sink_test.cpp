// SPDX-License-Identifier: Apache-2.0
//
// The html sink as the core drives it, and its report as a browser runs it: headless
// Chromium loads the file with #selftest (the page checks its own flame graphs render, a
// click zooms and hover explains, and writes the verdict into the DOM), the dumped DOM and
// Chromium's console log are asserted on, and a screenshot is kept as a test artifact.
#include <gtest/gtest.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <regex>
#include <string>
#include <vector>

#include "dl_plugin.hpp"
#include "fake_host.hpp"
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

std::string chromium() {
  for (const char* c : {"chromium", "chromium-browser", "google-chrome"})
    if (std::system((std::string("command -v ") + c + " >/dev/null 2>&1").c_str()) == 0) return c;
  return {};
}

std::string html_unescape(std::string s) {
  for (auto [from, to] : {std::pair{"&lt;", "<"}, {"&gt;", ">"}, {"&quot;", "\""}, {"&amp;", "&"}})
    for (std::size_t p; (p = s.find(from)) != std::string::npos;)
      s.replace(p, std::strlen(from), to);
  return s;
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
}

TEST_F(HtmlSinkTest, HeadlessChromiumRendersZoomsAndLogsNoErrors) {
  std::string browser = chromium();
  if (browser.empty())
    GTEST_SKIP() << "chromium not installed (scripts/install-deps.sh installs it)";
  start();
  feed_report();
  std::filesystem::create_directories(LOUPE_ARTIFACT_DIR);
  const std::string shot = std::string(LOUPE_ARTIFACT_DIR) + "/sinks_html_report.png";
  std::filesystem::remove(shot);
  const std::string flags =
      " --headless --no-sandbox --disable-gpu --disable-background-networking"
      " --disable-component-update --disable-sync --no-first-run --disable-dev-shm-usage"
      " --enable-logging=stderr --v=0 --window-size=1280,1400 --user-data-dir=" +
      dir_.file("profile");
  const std::string url = "file://" + dir_.file("report.html") + "#selftest";
  const std::string log = dir_.file("chromium.log");
  int rc = std::system(
      (browser + flags + " --dump-dom '" + url + "' > " + dir_.file("dom.html") + " 2> " + log)
          .c_str());
  std::string chrome_log = read_file(log);
  ASSERT_EQ(rc, 0) << chrome_log;
  std::string dom = read_file(dir_.file("dom.html"));
  std::smatch m;
  ASSERT_TRUE(std::regex_search(dom, m, std::regex(R"(<pre id="selftest-result">([^<]*)</pre>)")))
      << "the page's self-test did not run:\n"
      << dom.substr(0, 2000) << "\n"
      << chrome_log;
  json result = json::parse(html_unescape(m[1]));
  for (const auto& c : result["checks"]) EXPECT_TRUE(c["ok"].get<bool>()) << c.dump();
  EXPECT_TRUE(result["ok"].get<bool>()) << result.dump(2);
  EXPECT_NE(dom.find("<title>selftest:ok</title>"), std::string::npos);
  // Chromium prints the page's console messages and uncaught exceptions as CONSOLE lines.
  for (const auto& line : split_lines(chrome_log))
    EXPECT_EQ(line.find(":CONSOLE"), std::string::npos) << line;

  rc = std::system(
      (browser + flags + " --screenshot=" + shot + " '" + url + "' > /dev/null 2>> " + log)
          .c_str());
  ASSERT_EQ(rc, 0) << read_file(log);
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
