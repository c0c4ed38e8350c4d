// SPDX-License-Identifier: Apache-2.0
#include <gtest/gtest.h>

#include "dl_plugin.hpp"
#include "fake_host.hpp"
#include "sample_records.hpp"

namespace loupe::test {
namespace {

class ConsoleSinkTest : public ::testing::Test {
 protected:
  ConsoleSinkTest() : lib_(LOUPE_CONSOLE_SO) {
    host_.set_output_dir(dir_.path());
    host_.set("path", std::string("report.txt"));
  }

  std::string report() { return read_file(dir_.file("report.txt")); }
  static bool has(const std::string& text, const std::string& needle) {
    return text.find(needle) != std::string::npos;
  }
  static std::string line_with(const std::string& text, const std::string& needle) {
    for (const auto& l : split_lines(text))
      if (has(l, needle)) return l;
    return {};
  }

  TempDir dir_;
  FakeHost host_;
  DlPlugin lib_;
};

TEST_F(ConsoleSinkTest, HistogramShowsBarsStatsAndPercentilesWithBounds) {
  PluginInstance sink(lib_);
  ASSERT_EQ(sink.setup(host_), LOUPE_OK) << sink.last_error();
  SampleRecord h = latency_histogram();
  ASSERT_EQ(sink.consume(h.record()), LOUPE_OK);
  ASSERT_EQ(sink.flush(true), LOUPE_OK) << sink.last_error();
  std::string text = report();

  EXPECT_TRUE(has(text, "latency{comm=dd}  (ns, log2)")) << text;
  EXPECT_TRUE(has(text, "count 151   sum 300 µs   min 1.10 µs   max 70.0 µs   mean 1.99 µs"))
      << text;
  // The fullest bucket fills the default 40 columns; half its count fills half.
  std::string top = line_with(text, "[1.02 µs, 2.05 µs)");
  EXPECT_TRUE(has(top, "100 |" + std::string(40, '*') + "|   66.2%")) << top;
  std::string half = line_with(text, "[2.05 µs, 4.10 µs)");
  EXPECT_TRUE(has(half, "50 |" + std::string(20, '*') + std::string(20, ' ') + "|   33.1%"))
      << half;
  // The empty range between populated buckets is shown, not hidden.
  EXPECT_TRUE(has(line_with(text, "[4.10 µs, 65.5 µs)"), " 0 |")) << text;
  EXPECT_TRUE(has(text, "p50   ≈ 1.54 µs    (in [1.02 µs, 2.05 µs))")) << text;
  EXPECT_TRUE(has(text, "p99   ≈ 3.07 µs    (in [2.05 µs, 4.10 µs))")) << text;
  EXPECT_TRUE(has(text, "p99.9 ≈ 70.0 µs    (in [65.5 µs, 131 µs))")) << text;
  EXPECT_FALSE(has(text, "\033[")) << "color must be off when writing to a file";
}

TEST_F(ConsoleSinkTest, BarWidthIsConfigurable) {
  host_.set("bar_width", std::int64_t{10});
  PluginInstance sink(lib_);
  ASSERT_EQ(sink.setup(host_), LOUPE_OK) << sink.last_error();
  SampleRecord h = latency_histogram();
  ASSERT_EQ(sink.consume(h.record()), LOUPE_OK);
  ASSERT_EQ(sink.flush(true), LOUPE_OK);
  EXPECT_TRUE(has(line_with(report(), "[1.02 µs, 2.05 µs)"), "|**********|")) << report();
}

TEST_F(ConsoleSinkTest, PercentilesAreDerivedWhenAbsent) {
  PluginInstance sink(lib_);
  ASSERT_EQ(sink.setup(host_), LOUPE_OK) << sink.last_error();
  SampleRecord h(LOUPE_RECORD_HISTOGRAM, "size");
  h.builder().histogram(LOUPE_BUCKETS_LOG2, 0, "bytes", {{4096, 8192, 9}, {1048576, 2097152, 1}},
                        10, 1100000, 4096, 1500000);
  ASSERT_EQ(sink.consume(h.record()), LOUPE_OK);
  ASSERT_EQ(sink.flush(true), LOUPE_OK);
  std::string text = report();
  EXPECT_TRUE(has(text, "p50   ≈ 6.00 KiB   (in [4.00 KiB, 8.00 KiB))")) << text;
  EXPECT_TRUE(has(text, "p99   ≈ 1.43 MiB   (in [1.00 MiB, 2.00 MiB))")) << text;
}

TEST_F(ConsoleSinkTest, HealthVerdictSaysNoDataLost) {
  PluginInstance sink(lib_);
  ASSERT_EQ(sink.setup(host_), LOUPE_OK) << sink.last_error();
  SampleRecord ok1 = health(LOUPE_HEALTH_OK, "lost_kernel", "ring:events", 0);
  SampleRecord ok2 = health(LOUPE_HEALTH_OK, "received", "ring:events", 1234);
  ASSERT_EQ(sink.consume(ok1.record()), LOUPE_OK);
  ASSERT_EQ(sink.consume(ok2.record()), LOUPE_OK);
  ASSERT_EQ(sink.flush(true), LOUPE_OK);
  std::string text = report();
  EXPECT_TRUE(has(text, "HEALTH SUMMARY")) << text;
  EXPECT_TRUE(has(line_with(text, "received"), "1,234")) << text;
  EXPECT_TRUE(has(text, "VERDICT: no data lost (2 health checks OK)")) << text;
}

TEST_F(ConsoleSinkTest, HealthVerdictCountsLossesAndFailuresAndMarksThem) {
  PluginInstance sink(lib_);
  ASSERT_EQ(sink.setup(host_), LOUPE_OK) << sink.last_error();
  SampleRecord ok = health(LOUPE_HEALTH_OK, "received", "ring:outliers", 14);
  SampleRecord lost1 =
      health(LOUPE_HEALTH_WARN, "lost_kernel", "ring:outliers", 17, "reserve failed");
  SampleRecord lost2 = health(LOUPE_HEALTH_WARN, "dropped_queue", "queue:outliers", 3);
  SampleRecord failed =
      health(LOUPE_HEALTH_ERROR, "attach", "probe:sys_enter_read", 0, "no such tracepoint");
  for (auto* r : {&ok, &lost1, &lost2, &failed}) ASSERT_EQ(sink.consume(r->record()), LOUPE_OK);
  ASSERT_EQ(sink.flush(true), LOUPE_OK);
  std::string text = report();
  EXPECT_TRUE(has(line_with(text, "lost_kernel "), "<<<")) << text;
  EXPECT_TRUE(has(line_with(text, "attach "), "ERROR")) << text;
  EXPECT_FALSE(has(line_with(text, "received "), "<<<")) << text;
  EXPECT_TRUE(has(text,
                  "VERDICT: data lost or degraded at 2 place(s): dropped_queue@queue:outliers (3), "
                  "lost_kernel@ring:outliers (17); 1 component(s) failed: "
                  "attach@probe:sys_enter_read: no such tracepoint"))
      << text;
}

// A WARN of value 0 (a probe that never fired) is no loss, but the run is not "all OK".
TEST_F(ConsoleSinkTest, WarningsWithoutLossAreNamedNotCalledOk) {
  PluginInstance sink(lib_);
  ASSERT_EQ(sink.setup(host_), LOUPE_OK) << sink.last_error();
  SampleRecord ok = health(LOUPE_HEALTH_OK, "received", "ring:outliers", 14);
  SampleRecord silent =
      health(LOUPE_HEALTH_WARN, "probe_silent", "latency/read", 0, "the program never ran");
  for (auto* r : {&ok, &silent}) ASSERT_EQ(sink.consume(r->record()), LOUPE_OK);
  ASSERT_EQ(sink.flush(true), LOUPE_OK);
  std::string text = report();
  EXPECT_FALSE(has(text, "no data lost")) << text;
  EXPECT_TRUE(has(text, "VERDICT: 1 warning(s): probe_silent@latency/read: the program never ran"))
      << text;
}

TEST_F(ConsoleSinkTest, FinalReportWithoutHealthSaysLossIsUnknown) {
  PluginInstance sink(lib_);
  ASSERT_EQ(sink.setup(host_), LOUPE_OK) << sink.last_error();
  ASSERT_EQ(sink.flush(true), LOUPE_OK);
  EXPECT_TRUE(has(report(), "VERDICT: no health records received: losses are unknown")) << report();
}

TEST_F(ConsoleSinkTest, MetricsAreAlignedTablesGroupedByName) {
  PluginInstance sink(lib_);
  ASSERT_EQ(sink.setup(host_), LOUPE_OK) << sink.last_error();
  SampleRecord read(LOUPE_RECORD_METRIC, "syscalls");
  read.builder().label("syscall", "read").metric(LOUPE_METRIC_COUNTER, "count", 12345);
  SampleRecord open(LOUPE_RECORD_METRIC, "syscalls");
  open.builder().label("syscall", "openat").metric(LOUPE_METRIC_COUNTER, "count", 17);
  SampleRecord rss(LOUPE_RECORD_METRIC, "rss");
  rss.builder().metric(LOUPE_METRIC_GAUGE, "bytes", 3.0 * 1024 * 1024);
  for (auto* r : {&read, &open, &rss}) ASSERT_EQ(sink.consume(r->record()), LOUPE_OK);
  ASSERT_EQ(sink.flush(true), LOUPE_OK);
  std::string text = report();
  std::string l_read = line_with(text, "syscall=read");
  std::string l_open = line_with(text, "syscall=openat");
  EXPECT_TRUE(has(l_read, "counter  12,345  count")) << text;
  EXPECT_TRUE(has(l_open, "counter      17  count")) << text;
  EXPECT_EQ(l_read.find("counter"), l_open.find("counter"));
  EXPECT_TRUE(has(line_with(text, "gauge"), "3.00 MiB")) << text;
  EXPECT_LT(text.find("  rss"), text.find("  syscalls")) << text;
}

TEST_F(ConsoleSinkTest, StacksAreMergedRankedAndCutToTopN) {
  host_.set("top", std::int64_t{2});
  PluginInstance sink(lib_);
  ASSERT_EQ(sink.setup(host_), LOUPE_OK) << sink.last_error();
  loupe_frame a[3] = {{0x10, "leaf_a", "/bin/x", 0, LOUPE_FRAME_USER, LOUPE_RESOLVED_SYMTAB},
                      {0x20, "mid", "/bin/x", 0, LOUPE_FRAME_USER, LOUPE_RESOLVED_SYMTAB},
                      {0x30, "main", "/bin/x", 0, LOUPE_FRAME_USER, LOUPE_RESOLVED_SYMTAB}};
  loupe_frame b[2] = {
      {0x40, nullptr, "/usr/lib/libc.so.6", 0x99, LOUPE_FRAME_USER, LOUPE_UNRESOLVED_NO_SYMBOL},
      {0x30, "main", "/bin/x", 0, LOUPE_FRAME_USER, LOUPE_RESOLVED_SYMTAB}};
  loupe_frame c[1] = {{0xdead, nullptr, nullptr, 0, LOUPE_FRAME_USER, LOUPE_UNRESOLVED_NO_MODULE}};
  auto sample = [&](const loupe_frame* f, std::uint32_t n, std::int64_t v) {
    SampleRecord s(LOUPE_RECORD_STACK_SAMPLE, "cpu");
    s.builder().frames(f, n).value("samples", "count", v);
    ASSERT_EQ(sink.consume(s.record()), LOUPE_OK);
  };
  sample(a, 3, 30);
  sample(b, 2, 50);
  sample(a, 3, 40);  // same stack: merged into 70
  sample(c, 1, 5);
  ASSERT_EQ(sink.flush(true), LOUPE_OK);
  std::string text = report();
  EXPECT_TRUE(has(text, "cpu  top 2 of 3 stacks by samples, total 125")) << text;
  std::string first = line_with(text, "leaf_a;mid;main");
  std::string second = line_with(text, "libc.so.6+0x99;main");
  EXPECT_TRUE(has(first, "70  56.0%")) << text;
  EXPECT_TRUE(has(second, "50  40.0%")) << text;
  EXPECT_LT(text.find(first), text.find(second));
  EXPECT_FALSE(has(text, "0xdead")) << "the third stack is beyond top=2";
}

TEST_F(ConsoleSinkTest, EventsAreCountedAndTheSlowestListed) {
  host_.set("top", std::int64_t{3});
  PluginInstance sink(lib_);
  ASSERT_EQ(sink.setup(host_), LOUPE_OK) << sink.last_error();
  const std::uint64_t durations_ms[] = {4, 9, 1, 7, 2, 8};
  for (std::uint64_t ms : durations_ms) {
    SampleRecord e(LOUPE_RECORD_EVENT, "slow_read");
    e.builder()
        .event_time(kWindowStart)
        .field_u("duration_ns", ms * 1000000)
        .field("fd", std::int64_t{7});
    ASSERT_EQ(sink.consume(e.record()), LOUPE_OK);
  }
  ASSERT_EQ(sink.flush(true), LOUPE_OK);
  std::string text = report();
  EXPECT_TRUE(has(line_with(text, "slow_read  "), "6  9.00 ms  duration_ns")) << text;
  EXPECT_TRUE(has(text, "slow calls: slow_read, 3 slowest of 6 by duration_ns")) << text;
  std::size_t p9 = text.find("9.00 ms  fd=7"), p8 = text.find("8.00 ms  fd=7"),
              p7 = text.find("7.00 ms  fd=7");
  ASSERT_NE(p9, std::string::npos) << text;
  ASSERT_NE(p8, std::string::npos) << text;
  ASSERT_NE(p7, std::string::npos) << text;
  EXPECT_LT(p9, p8);
  EXPECT_LT(p8, p7);
  EXPECT_FALSE(has(text, "4.00 ms  fd=7")) << text;
}

TEST_F(ConsoleSinkTest, IntervalFlushPrintsAnIntervalSectionAndSilenceWhenEmpty) {
  PluginInstance sink(lib_);
  ASSERT_EQ(sink.setup(host_), LOUPE_OK) << sink.last_error();
  ASSERT_EQ(sink.flush(false), LOUPE_OK);
  EXPECT_EQ(report(), "");
  SampleRecord h = latency_histogram();
  ASSERT_EQ(sink.consume(h.record(false)), LOUPE_OK);
  ASSERT_EQ(sink.flush(false), LOUPE_OK);
  std::string text = report();
  EXPECT_TRUE(has(text, "loupe interval #1")) << text;
  EXPECT_FALSE(has(text, "loupe report")) << text;
  ASSERT_EQ(sink.consume(h.record(true)), LOUPE_OK);
  ASSERT_EQ(sink.flush(true), LOUPE_OK);
  text = report();
  EXPECT_TRUE(has(text, "loupe report")) << text;
  // The interval batch was reset: the final report holds one copy of the histogram.
  std::string final_part = text.substr(text.find("loupe report"));
  EXPECT_EQ(final_part.find("latency{comm=dd}"), final_part.rfind("latency{comm=dd}"));
}

// A color outside the schema's choices never reaches the sink: `loupe validate` refuses it
// (tests/badinput, value_not_a_choice).
TEST_F(ConsoleSinkTest, ColorAlwaysEmitsAnsi) {
  host_.set("color", std::string("always"));
  {
    PluginInstance sink(lib_);
    ASSERT_EQ(sink.setup(host_), LOUPE_OK) << sink.last_error();
    SampleRecord lost = health(LOUPE_HEALTH_WARN, "lost_kernel", "ring:x", 2);
    ASSERT_EQ(sink.consume(lost.record()), LOUPE_OK);
    ASSERT_EQ(sink.flush(true), LOUPE_OK);
    EXPECT_TRUE(has(
        report(), "\033[1;31mVERDICT: data lost or degraded at 1 place(s): lost_kernel@ring:x (2)"))
        << report();
  }
}

TEST_F(ConsoleSinkTest, StdoutIsTheDefault) {
  FakeHost host;
  PluginInstance sink(lib_);
  ASSERT_EQ(sink.setup(host), LOUPE_OK) << sink.last_error();
  SampleRecord ok = health(LOUPE_HEALTH_OK, "lost_kernel", "ring:events", 0);
  ASSERT_EQ(sink.consume(ok.record()), LOUPE_OK);
  ::testing::internal::CaptureStdout();
  int rc = sink.flush(true);
  std::string out = ::testing::internal::GetCapturedStdout();
  ASSERT_EQ(rc, LOUPE_OK);
  EXPECT_TRUE(has(out, "VERDICT: no data lost")) << out;
}

TEST_F(ConsoleSinkTest, UnwritablePathFailsSetupNamingThePath) {
  host_.set("path", std::string("/proc/loupe-no-such-file/report.txt"));
  PluginInstance sink(lib_);
  EXPECT_NE(sink.setup(host_), LOUPE_OK);
  EXPECT_TRUE(has(sink.last_error(), "console: cannot open '/proc/loupe-no-such-file/report.txt'"))
      << sink.last_error();
}

}  // namespace
}  // namespace loupe::test
