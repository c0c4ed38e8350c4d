// SPDX-License-Identifier: Apache-2.0
#include <gtest/gtest.h>

#include <deque>

#include "dl_plugin.hpp"
#include "fake_host.hpp"
#include "report_text.hpp"
#include "sample_records.hpp"

namespace loupe::test {
namespace {

using loupe::sinks::display_width;
using loupe::sinks::wrap_line;

std::string thousands(int n) {
  std::string d = std::to_string(n);
  return d.size() > 3 ? d.substr(0, d.size() - 3) + "," + d.substr(d.size() - 3) : d;
}

class ConsoleSinkTest : public ::testing::Test {
 protected:
  ConsoleSinkTest() : lib_(LOUPE_CONSOLE_SO) {
    host_.set_output_dir(dir_.path());
    host_.set("path", std::string("report.txt"));
  }

  std::string report() { return read_file(dir_.file("report.txt")); }
  // Every record to a new sink, then its final report.
  std::string final_report(const std::deque<SampleRecord*>& recs) {
    PluginInstance sink(lib_);
    EXPECT_EQ(sink.setup(host_), LOUPE_OK) << sink.last_error();
    for (SampleRecord* r : recs) EXPECT_EQ(sink.consume(r->record()), LOUPE_OK);
    EXPECT_EQ(sink.flush(true), LOUPE_OK);
    return report();
  }
  std::string final_report(std::deque<SampleRecord>& recs) {
    std::deque<SampleRecord*> all;
    for (auto& r : recs) all.push_back(&r);
    return final_report(all);
  }
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

TEST_F(ConsoleSinkTest, HistogramIsOneSummaryLineAndItsBars) {
  SampleRecord h = latency_histogram();
  std::string text = final_report({&h});

  EXPECT_TRUE(has(text,
                  "latency{comm=dd}  count 151  min 1.10 µs  p50 1.54 µs  p99 3.07 µs  "
                  "max 70.0 µs"))
      << text;
  // Buckets of integers [lower, upper) show as (lower - 1, upper - 1]: [1024, 2048) is
  // (1023, 2047]. The fullest bucket fills the default 40 columns; half its count fills half.
  std::string top = line_with(text, "(1.02 µs, 2.05 µs]");
  EXPECT_TRUE(has(top, "100 |" + std::string(40, '*') + "|   66.2%   66.2%")) << top;
  std::string half = line_with(text, "(2.05 µs, 4.09 µs]");
  EXPECT_TRUE(has(half, "50 |" + std::string(20, '*') + std::string(20, ' ') + "|   33.1%"))
      << half;
  // The empty range between populated buckets is shown, not hidden.
  EXPECT_TRUE(has(line_with(text, "(4.09 µs, 65.5 µs]"), " 0 |")) << text;
  // Bounds, sums and the column header are verbose mode's.
  EXPECT_FALSE(has(text, "(in (")) << text;
  EXPECT_FALSE(has(text, "|distribution")) << text;
  EXPECT_FALSE(has(text, "\033[")) << "color must be off when writing to a file";
}

// A spread over 10 powers of two keeps the 4 rows holding the most values as measured and
// folds the rest into one row below and one above, each an exact range that says how many
// buckets it holds; verbose shows every bucket.
TEST_F(ConsoleSinkTest, AWideHistogramFoldsItsTailsIntoOneRowEach) {
  SampleRecord r(LOUPE_RECORD_HISTOGRAM, "wide");
  std::vector<loupe_bucket> b;
  std::uint64_t total = 0;
  std::uint64_t i = 10;
  for (std::uint64_t n : {1, 2, 3, 40, 90, 70, 30, 4, 2, 1}) {
    b.push_back(loupe_bucket{std::uint64_t{1} << i, std::uint64_t{1} << (i + 1), n});
    total += n;
    ++i;
  }
  r.builder().histogram(LOUPE_BUCKETS_LOG2, 0, "ns", b, total, 0, 1024, 2097151);
  std::string text = final_report({&r});
  EXPECT_TRUE(has(line_with(text, "(1.02 µs, 8.19 µs]"), "6 |")) << text;
  EXPECT_TRUE(has(line_with(text, "(1.02 µs, 8.19 µs]"), "(3 buckets)")) << text;
  for (const char* kept :
       {"(8.19 µs, 16.4 µs]", "(16.4 µs, 32.8 µs]", "(32.8 µs, 65.5 µs]", "(65.5 µs, 131 µs]"})
    EXPECT_FALSE(line_with(text, kept).empty()) << kept << "\n" << text;
  EXPECT_TRUE(has(line_with(text, "(131 µs, 1.05 ms]"), "7 |")) << text;
  EXPECT_TRUE(has(line_with(text, "(131 µs, 1.05 ms]"), "(3 buckets)")) << text;
  host_.set("verbose", true);
  text = final_report({&r});
  EXPECT_FALSE(line_with(text, "(1.02 µs, 2.05 µs]").empty()) << text;
  EXPECT_FALSE(has(text, "buckets)")) << text;
}

TEST_F(ConsoleSinkTest, VerboseHistogramAddsSumMeanAndPercentileBounds) {
  host_.set("verbose", true);
  SampleRecord h = latency_histogram();
  std::string text = final_report({&h});
  EXPECT_TRUE(has(text, "latency{comm=dd}  (ns, log2)  count 151")) << text;
  EXPECT_TRUE(has(text, "|distribution")) << text;
  EXPECT_TRUE(has(text, "sum 300 µs   mean 1.99 µs")) << text;
  EXPECT_TRUE(has(text, "p50   ≈ 1.54 µs    (in (1.02 µs, 2.05 µs])")) << text;
  EXPECT_TRUE(has(text, "p99   ≈ 3.07 µs    (in (2.05 µs, 4.09 µs])")) << text;
  EXPECT_TRUE(has(text, "p99.9 ≈ 70.0 µs    (in (65.5 µs, 131 µs])")) << text;
}

TEST_F(ConsoleSinkTest, BarWidthIsConfigurable) {
  host_.set("bar_width", std::int64_t{10});
  PluginInstance sink(lib_);
  ASSERT_EQ(sink.setup(host_), LOUPE_OK) << sink.last_error();
  SampleRecord h = latency_histogram();
  ASSERT_EQ(sink.consume(h.record()), LOUPE_OK);
  ASSERT_EQ(sink.flush(true), LOUPE_OK);
  EXPECT_TRUE(has(line_with(report(), "(1.02 µs, 2.05 µs]"), "|**********|")) << report();
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
  EXPECT_TRUE(has(text, "p50 6.00 KiB  p99 1.43 MiB  max 1.43 MiB")) << text;
}

// Nothing lost: the verdict is the whole health section; verbose lists every check.
TEST_F(ConsoleSinkTest, HealthVerdictSaysNoDataLostAndVerboseListsEveryCheck) {
  for (bool verbose : {false, true}) {
    host_.set("verbose", verbose);
    PluginInstance sink(lib_);
    ASSERT_EQ(sink.setup(host_), LOUPE_OK) << sink.last_error();
    SampleRecord ok1 = health(LOUPE_HEALTH_OK, "lost_kernel", "ring:events", 0);
    SampleRecord ok2 = health(LOUPE_HEALTH_OK, "received", "ring:events", 1234);
    ASSERT_EQ(sink.consume(ok1.record()), LOUPE_OK);
    ASSERT_EQ(sink.consume(ok2.record()), LOUPE_OK);
    ASSERT_EQ(sink.flush(true), LOUPE_OK);
    std::string text = report();
    EXPECT_TRUE(has(text, "VERDICT: no data lost (2 health checks OK)")) << text;
    EXPECT_EQ(has(text, "HEALTH SUMMARY"), verbose) << text;
    EXPECT_EQ(has(line_with(text, "received"), "1,234"), verbose) << text;
    EXPECT_EQ(has(line_with(text, "lost_kernel"), "OK"), verbose) << text;
  }
}

TEST_F(ConsoleSinkTest, HealthVerdictCountsLossesAndFailuresAndMarksThem) {
  host_.set("width", std::int64_t{1000});  // the verdict on one line, to compare it whole
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
  EXPECT_TRUE(has(text, "HEALTH SUMMARY")) << text;
  EXPECT_TRUE(has(line_with(text, "lost_kernel "), "<<<")) << text;
  EXPECT_TRUE(has(line_with(text, "attach "), "ERROR")) << text;
  // Only the degraded places are listed, the failure first.
  EXPECT_FALSE(has(text, "received ")) << text;
  EXPECT_LT(text.find("attach "), text.find("dropped_queue ")) << text;
  EXPECT_LT(text.find("attach "), text.find("lost_kernel ")) << text;
  EXPECT_TRUE(has(text,
                  "VERDICT: data lost or degraded at 2 place(s): dropped_queue@queue:outliers (3), "
                  "lost_kernel@ring:outliers (17); 1 component(s) failed: "
                  "attach@probe:sys_enter_read: no such tracepoint"))
      << text;
}

// A producer that says what a loss is a part of gets a share, and lost is told from
// degraded: "3 of 196 stacks" is not "3 records missing", and neither reads like 50 %.
TEST_F(ConsoleSinkTest, HealthVerdictGivesSharesAndTellsLostFromDegraded) {
  host_.set("width", std::int64_t{1000});
  PluginInstance sink(lib_);
  ASSERT_EQ(sink.setup(host_), LOUPE_OK) << sink.last_error();
  SampleRecord stopped = health_of(LOUPE_HEALTH_WARN, "stacks", "cpusample/unwind_bad_frame", 3,
                                   196, "stacks", LOUPE_HEALTH_EFFECT_DEGRADED);
  SampleRecord missed = health_of(LOUPE_HEALTH_WARN, "offcpu", "offcpu/missed_switch_outs", 11,
                                  33000, "switch-outs", LOUPE_HEALTH_EFFECT_DEGRADED);
  for (auto* r : {&stopped, &missed}) ASSERT_EQ(sink.consume(r->record()), LOUPE_OK);
  ASSERT_EQ(sink.flush(true), LOUPE_OK);
  std::string text = report();
  EXPECT_TRUE(has(text,
                  "VERDICT: nothing lost; degraded at 2 place(s): 3 of 196 stacks (1.5%) at "
                  "stacks@cpusample/unwind_bad_frame, 11 of 33,000 switch-outs (0.033%) at "
                  "offcpu@offcpu/missed_switch_outs"))
      << text;
  EXPECT_FALSE(has(text, "data lost")) << text;

  // With a loss too: lost first, then degraded.
  SampleRecord lost = health_of(LOUPE_HEALTH_WARN, "ring_lost_kernel", "latency/outliers", 17,
                                52110, "records", LOUPE_HEALTH_EFFECT_LOST);
  for (auto* r : {&stopped, &missed, &lost}) ASSERT_EQ(sink.consume(r->record()), LOUPE_OK);
  ASSERT_EQ(sink.flush(true), LOUPE_OK);
  text = report();
  EXPECT_TRUE(has(text,
                  "VERDICT: data lost at 1 place(s): 17 of 52,110 records (0.033%) at "
                  "ring_lost_kernel@latency/outliers; degraded at 2 place(s): 3 of 196"))
      << text;
}

// A WARN of value 0 (losses that cannot be counted) is no loss, but the run is not "all OK".
TEST_F(ConsoleSinkTest, WarningsWithoutLossAreNamedNotCalledOk) {
  PluginInstance sink(lib_);
  ASSERT_EQ(sink.setup(host_), LOUPE_OK) << sink.last_error();
  SampleRecord ok = health(LOUPE_HEALTH_OK, "received", "ring:outliers", 14);
  SampleRecord unknown = health(LOUPE_HEALTH_WARN, "ring_lost_kernel_unknown", "x/events", 0,
                                "the plugin does not count reserve failures");
  for (auto* r : {&ok, &unknown}) ASSERT_EQ(sink.consume(r->record()), LOUPE_OK);
  ASSERT_EQ(sink.flush(true), LOUPE_OK);
  std::string text = report();
  EXPECT_FALSE(has(text, "no data lost")) << text;
  EXPECT_TRUE(has(text,
                  "VERDICT: 1 warning(s): ring_lost_kernel_unknown@x/events: the plugin does not "
                  "count reserve failures"))
      << text;
}

// `loupe run profiles/latency.toml -- true`: three targets the command never called are
// no loss (whatever severity their producer gave them); they are named on a line of their
// own, and only real loss makes the verdict.
TEST_F(ConsoleSinkTest, ProbesThatNeverFiredAreListedApartFromTheVerdict) {
  PluginInstance sink(lib_);
  ASSERT_EQ(sink.setup(host_), LOUPE_OK) << sink.last_error();
  SampleRecord ok = health(LOUPE_HEALTH_OK, "unmatched_exits", "latency/read", 0);
  SampleRecord write = health(LOUPE_HEALTH_OK, "silent_probe", "latency/write", 1,
                              "the probe never fired for this target");
  SampleRecord old_style = health(LOUPE_HEALTH_WARN, "silent_probe", "latency/nanosleep", 1,
                                  "the probe never fired for this target");
  SampleRecord futex = health(LOUPE_HEALTH_OK, "silent_probe_futex", "lockwait", 1);
  for (auto* r : {&ok, &write, &old_style, &futex}) ASSERT_EQ(sink.consume(r->record()), LOUPE_OK);
  ASSERT_EQ(sink.flush(true), LOUPE_OK);
  std::string text = report();
  EXPECT_TRUE(has(text, "VERDICT: no data lost (1 health checks OK)")) << text;
  EXPECT_TRUE(has(text,
                  "probes that never fired (not loss): latency/nanosleep, latency/write, "
                  "lockwait (futex)"))
      << text;
  EXPECT_FALSE(has(text, "HEALTH SUMMARY")) << text;

  // Real loss beside them is still the verdict, and the only place it names.
  PluginInstance again(lib_);
  ASSERT_EQ(again.setup(host_), LOUPE_OK) << again.last_error();
  SampleRecord lost = health(LOUPE_HEALTH_WARN, "unmatched_exits", "latency/read", 2);
  for (auto* r : {&lost, &write}) ASSERT_EQ(again.consume(r->record()), LOUPE_OK);
  ASSERT_EQ(again.flush(true), LOUPE_OK);
  text = report();
  EXPECT_TRUE(has(text,
                  "VERDICT: data lost or degraded at 1 place(s): "
                  "unmatched_exits@latency/read (2)\n"))
      << text;
  EXPECT_TRUE(has(text, "probes that never fired (not loss): latency/write")) << text;
}

TEST_F(ConsoleSinkTest, FinalReportWithoutHealthSaysLossIsUnknown) {
  PluginInstance sink(lib_);
  ASSERT_EQ(sink.setup(host_), LOUPE_OK) << sink.last_error();
  ASSERT_EQ(sink.flush(true), LOUPE_OK);
  EXPECT_TRUE(has(report(), "VERDICT: no health records received: losses are unknown")) << report();
}

TEST_F(ConsoleSinkTest, MetricTableIsSortedByValueAndUnlabelledValuesHeadTheSection) {
  SampleRecord open(LOUPE_RECORD_METRIC, "syscalls");
  open.builder().label("syscall", "openat").metric(LOUPE_METRIC_COUNTER, "count", 17);
  SampleRecord read(LOUPE_RECORD_METRIC, "syscalls");
  read.builder().label("syscall", "read").metric(LOUPE_METRIC_COUNTER, "count", 12345);
  SampleRecord brk(LOUPE_RECORD_METRIC, "syscalls");
  brk.builder().label("syscall", "brk").metric(LOUPE_METRIC_COUNTER, "count", 300);
  SampleRecord rss(LOUPE_RECORD_METRIC, "rss");
  rss.builder().metric(LOUPE_METRIC_GAUGE, "bytes", 3.0 * 1024 * 1024);
  std::string text = final_report({&open, &read, &brk, &rss});
  EXPECT_TRUE(has(line_with(text, "══ testplug"), "testplug · rss 3.00 MiB")) << text;
  std::vector<std::string> lines = split_lines(text);
  auto at = [&](const std::string& needle) {
    for (std::size_t i = 0; i < lines.size(); ++i)
      if (has(lines[i], needle)) return i;
    return lines.size();
  };
  // One header, then the rows from the largest value down, the values right-aligned.
  std::size_t header = at("syscall  syscalls");
  ASSERT_LT(header, lines.size()) << text;
  EXPECT_TRUE(has(lines[header + 1], "read       12,345")) << text;
  EXPECT_TRUE(has(lines[header + 2], "brk           300")) << text;
  EXPECT_TRUE(has(lines[header + 3], "openat         17")) << text;
  EXPECT_EQ(lines[header].size(), lines[header + 1].size()) << text;
}

// Without labels a histogram has no row to join: its summary line says its figures, the
// headline keeps to the metrics, and no one-row table repeats them.
TEST_F(ConsoleSinkTest, AnUnlabelledHistogramStaysOutOfTheHeadline) {
  SampleRecord rss(LOUPE_RECORD_METRIC, "rss");
  rss.builder().metric(LOUPE_METRIC_GAUGE, "bytes", 2048);
  SampleRecord size(LOUPE_RECORD_HISTOGRAM, "alloc_size");
  size.builder().histogram(LOUPE_BUCKETS_LOG2, 0, "bytes", {{64, 128, 4}}, 4, 400, 90, 110);
  std::string text = final_report({&rss, &size});
  std::string heading = line_with(text, "══ testplug");
  EXPECT_TRUE(has(heading, "testplug · rss 2.00 KiB ═")) << text;
  EXPECT_FALSE(has(heading, "p50")) << text;
  EXPECT_TRUE(has(text, "  alloc_size  count 4  min 90 B")) << text;
  EXPECT_FALSE(has(text, "count      p50")) << text;
}

// Metrics of one producer that share label keys are one table: a column per metric, the
// histogram of the same keys adds p50, p99 and max, zero-only columns and rows leave the
// table but are named below it.
TEST_F(ConsoleSinkTest, MetricsOfTheSameLabelKeysPivotIntoOneTable) {
  std::deque<SampleRecord> recs;  // builders keep pointers into themselves: never moved
  auto metric = [&](const char* name, const char* target, double v, const char* unit = "count") {
    recs.emplace_back(LOUPE_RECORD_METRIC, name);
    recs.back()
        .builder()
        .label("target", target)
        .label("mode", "tp")
        .metric(LOUPE_METRIC_COUNTER, unit, v);
  };
  metric("calls", "fast", 40);
  metric("matched", "fast", 40);
  metric("outliers", "fast", 0);
  metric("calls", "slow", 900);
  metric("matched", "slow", 899);
  metric("outliers", "slow", 0);
  metric("calls", "idle", 0);
  metric("matched", "idle", 0);
  metric("outliers", "idle", 0);
  recs.emplace_back(LOUPE_RECORD_HISTOGRAM, "latency");
  // The same label keys in another order: the same row.
  recs.back()
      .builder()
      .label("mode", "tp")
      .label("target", "slow")
      .histogram(LOUPE_BUCKETS_LOG2, 0, "ns", {{1024, 2048, 899}}, 899, 899 * 1500, 1100, 2000);
  recs.back().percentiles({{0.5, 1536, 1024, 2048}, {0.99, 1900, 1024, 2048}});
  recs.emplace_back(LOUPE_RECORD_METRIC, "syscalls");
  recs.back().builder().label("syscall", "read").metric(LOUPE_METRIC_COUNTER, "count", 5);
  std::string text = final_report(recs);

  std::vector<std::string> lines = split_lines(text);
  std::size_t header = 0;
  while (header < lines.size() && !has(lines[header], "target")) ++header;
  ASSERT_LT(header + 3, lines.size()) << text;
  EXPECT_TRUE(has(lines[header], "target  mode  calls  matched      p50      p99      max"))
      << text;
  EXPECT_TRUE(has(lines[header + 1], "slow    tp      900      899  1.54 µs  1.90 µs  2.00 µs"))
      << text;
  EXPECT_TRUE(has(lines[header + 2], "fast    tp       40       40        -        -        -"))
      << text;
  EXPECT_TRUE(has(lines[header + 3], "all zero: outliers")) << text;
  EXPECT_TRUE(has(lines[header + 4], "1 all-zero row(s): target=idle,mode=tp")) << text;
  EXPECT_FALSE(has(text, "idle    tp")) << text;
  // Other label keys, another table.
  EXPECT_TRUE(has(text, "syscall  syscalls")) << text;
  EXPECT_TRUE(has(line_with(text, "  read "), "5")) << text;
}

TEST_F(ConsoleSinkTest, VerboseKeepsZeroColumnsAndRows) {
  host_.set("verbose", true);
  std::deque<SampleRecord> recs;  // builders keep pointers into themselves: never moved
  for (const char* target : {"busy", "idle"})
    for (const char* name : {"calls", "outliers"}) {
      recs.emplace_back(LOUPE_RECORD_METRIC, name);
      recs.back()
          .builder()
          .label("target", target)
          .metric(LOUPE_METRIC_COUNTER, "count",
                  std::string(target) == "busy" && name[0] == 'c' ? 7 : 0);
    }
  std::string text = final_report(recs);
  EXPECT_TRUE(has(text, "target  calls  outliers")) << text;
  EXPECT_TRUE(has(text, "busy        7         0")) << text;
  EXPECT_TRUE(has(text, "idle        0         0")) << text;
  EXPECT_FALSE(has(text, "all zero")) << text;
}

// A table of histograms alone is ranked by count: the busiest series first, in the table
// and in the bars below it.
TEST_F(ConsoleSinkTest, HistogramsWithoutMetricsRankByCount) {
  std::deque<SampleRecord> recs;  // builders keep pointers into themselves: never moved
  for (auto [disk, n] : {std::pair{"sda", 3}, std::pair{"nvme0n1", 70}}) {
    recs.emplace_back(LOUPE_RECORD_HISTOGRAM, "bio");
    recs.back()
        .builder()
        .label("disk", disk)
        .histogram(LOUPE_BUCKETS_LOG2, 0, "ns", {{4096, 8192, static_cast<std::uint64_t>(n)}},
                   static_cast<std::uint64_t>(n), 5000ull * n, 5000, 5000);
  }
  std::string text = final_report(recs);
  EXPECT_TRUE(has(text, "disk     count      p50      p99      max")) << text;
  EXPECT_LT(text.find("nvme0n1     70"), text.find("sda          3")) << text;
  EXPECT_LT(text.find("bio{disk=nvme0n1}  count 70"), text.find("bio{disk=sda}  count 3")) << text;
}

// Sections follow the profile's order (loupe_session_info.profilers), whatever order the
// records arrive in; producers the profile does not list (the host's own) follow in the
// order they arrived.
TEST_F(ConsoleSinkTest, ProducersAreSectionsInProfileOrder) {
  const char* profilers[] = {"syscount", "latency"};
  host_.session()->profilers = profilers;
  host_.session()->n_profilers = 2;
  PluginInstance sink(lib_);
  ASSERT_EQ(sink.setup(host_), LOUPE_OK) << sink.last_error();
  SampleRecord lat = latency_histogram();
  SampleRecord own(LOUPE_RECORD_METRIC, "probe_runs");
  own.builder().label("probe", "sys_enter").metric(LOUPE_METRIC_COUNTER, "count", 4);
  SampleRecord sys(LOUPE_RECORD_METRIC, "syscalls");
  sys.builder().label("syscall", "read").metric(LOUPE_METRIC_COUNTER, "count", 9);
  ASSERT_EQ(sink.consume(lat.record(true, "latency")), LOUPE_OK);
  ASSERT_EQ(sink.consume(own.record(true, "loupe")), LOUPE_OK);
  ASSERT_EQ(sink.consume(sys.record(true, "syscount")), LOUPE_OK);
  ASSERT_EQ(sink.flush(true), LOUPE_OK);
  std::string text = report();
  std::size_t s = text.find("══ syscount"), l = text.find("══ latency"), o = text.find("══ loupe");
  ASSERT_NE(s, std::string::npos) << text;
  ASSERT_NE(l, std::string::npos) << text;
  ASSERT_NE(o, std::string::npos) << text;
  EXPECT_LT(s, l) << text;
  EXPECT_LT(l, o) << text;
  EXPECT_LT(text.find("syscalls"), l) << "syscount's table belongs to its section";
  EXPECT_GT(text.find("latency{comm=dd}"), l) << text;
  EXPECT_GT(text.find("probe_runs"), o) << text;
}

// An interval report to a file (not a terminal) is appended, never drawn over.
TEST_F(ConsoleSinkTest, IntervalReportsToAFileAreAppendedWithoutScreenControl) {
  host_.session()->interval_s = 1;
  PluginInstance sink(lib_);
  ASSERT_EQ(sink.setup(host_), LOUPE_OK) << sink.last_error();
  SampleRecord h = latency_histogram();
  for (int i = 0; i < 2; ++i) {
    ASSERT_EQ(sink.consume(h.record(false)), LOUPE_OK);
    ASSERT_EQ(sink.flush(false), LOUPE_OK);
  }
  ASSERT_EQ(sink.flush(true), LOUPE_OK);
  std::string text = report();
  EXPECT_TRUE(has(text, "loupe interval #1")) << text;
  EXPECT_TRUE(has(text, "loupe interval #2")) << text;
  EXPECT_TRUE(has(text, "loupe report")) << text;
  EXPECT_FALSE(has(text, "\033[")) << text;
}

// A live frame's lines end at the terminal's width: code points are columns, and escape
// sequences are kept whole (and closed) without counting.
TEST(ConsoleFitWidth, CutsAtColumnsKeepingEscapesWhole) {
  using loupe::sinks::fit_width;
  EXPECT_EQ(fit_width("abcdef", 4), "abcd");
  EXPECT_EQ(fit_width("abc", 10), "abc");
  EXPECT_EQ(fit_width("2.60 µs ═══", 7), "2.60 µs");
  EXPECT_EQ(fit_width("\033[1m══ latency ══\033[0m", 5), "\033[1m══ la\033[0m");
  EXPECT_EQ(fit_width("\033[2mab\033[0m", 2), "\033[2mab\033[0m");
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

// Issue 32: fileio on `gzip + cat + sync` printed 66 rows despite top, then 66 histograms,
// 290 columns wide, each histogram saying `min 0 ns` above a lowest bucket of 512 ns.
// Every table stops at `top` and counts the rest with their share; histograms are drawn
// for the busiest of each name and the rest counted; no line is wider than 120 columns.
TEST_F(ConsoleSinkTest, ManyRowsHonourTopAndFitTheWidth) {
  std::deque<SampleRecord> recs;
  const std::string dir = "/usr/lib/x86_64-linux-gnu/some/rather/deep/directory/of/locale/files/";
  for (int i = 0; i < 30; ++i) {
    const std::string path = dir + "LC_FILE_" + std::to_string(i);
    recs.emplace_back(LOUPE_RECORD_METRIC, "file_ops");
    recs.back()
        .builder()
        .label("path", path)
        .label("op", "read")
        .metric(LOUPE_METRIC_COUNTER, "", 100 - i);
    // fileio does not measure the minimum: 0 beside a lowest bucket of [513, 1025).
    recs.emplace_back(LOUPE_RECORD_HISTOGRAM, "file_latency");
    recs.back()
        .builder()
        .label("path", path)
        .label("op", "read")
        .histogram(LOUPE_BUCKETS_LOG2, 0, "ns",
                   {{513, 1025, 1}, {2049, 4097, std::uint64_t(99 - i)}}, std::uint64_t(100 - i), 0,
                   0, 4000);
  }
  std::string text = final_report(recs);
  std::size_t rows = 0, drawn = 0;
  for (const auto& l : split_lines(text)) {
    EXPECT_LE(display_width(l), 120u) << l << "\n" << text;
    if (has(l, "LC_FILE_") && !has(l, "{")) ++rows;
    if (has(l, "file_latency{")) ++drawn;
    EXPECT_FALSE(has(l, "min 0 ns")) << "the lowest bucket cannot hold 0: " << l;
  }
  EXPECT_EQ(rows, 10u) << "console top defaults to 10\n" << text;
  // The 20 rows left out hold 90 + 89 + ... + 71 = 1,610 of 2,565 file_ops; the 27
  // histograms not drawn all but the first three (100 + 99 + 98).
  EXPECT_TRUE(has(text, "… 20 more row(s) with 62.8% of file_ops (console top = 10)")) << text;
  EXPECT_EQ(drawn, 3u) << text;
  EXPECT_TRUE(
      has(text, "… 27 more file_latency histogram(s) not drawn, 2,268 of 2,565 values (88.4%)"))
      << text;
  EXPECT_TRUE(has(line_with(text, "file_latency{"), "min >512 ns")) << text;
  // The rows shown keep the file's name: a path is elided in its middle.
  EXPECT_TRUE(has(text, "LC_FILE_0 ")) << text;
  EXPECT_TRUE(has(text, "…")) << text;

  host_.set("top", std::int64_t{40});
  host_.set("verbose", true);
  text = final_report(recs);
  EXPECT_FALSE(has(text, "more row(s)")) << text;
  EXPECT_FALSE(has(text, "not drawn")) << text;
}

// A table with more columns than the width holds is split: each part repeats the labels,
// so every value stays in its row and under its column's name.
TEST_F(ConsoleSinkTest, AWideTableIsSplitRepeatingItsLabels) {
  std::deque<SampleRecord> recs;
  std::vector<std::string> names;
  for (int m = 0; m < 12; ++m) {
    names.push_back("a_rather_long_metric_name_" + std::to_string(m));
    for (const char* dev : {"vda", "vdb"}) {
      recs.emplace_back(LOUPE_RECORD_METRIC, names.back());
      recs.back()
          .builder()
          .label("device", dev)
          .metric(LOUPE_METRIC_COUNTER, "", 1000 + m + (dev[2] == 'a' ? 0 : 500));
    }
  }
  std::string text = final_report(recs);
  std::size_t headers = 0;
  for (const auto& l : split_lines(text)) {
    EXPECT_LE(display_width(l), 120u) << l << "\n" << text;
    if (has(l, "device  ")) ++headers;
  }
  EXPECT_GE(headers, 3u) << text;
  for (int m = 0; m < 12; ++m) {
    EXPECT_TRUE(has(text, names[static_cast<std::size_t>(m)])) << text;
    EXPECT_TRUE(has(text, thousands(1000 + m))) << text;
  }
}

// A deep stack of long C++ symbols fits the width: the leaf and its caller whole, the
// frames that did not fit counted; its further values keep their columns.
TEST_F(ConsoleSinkTest, ADeepStackIsElidedKeepingTheLeafAndItsCaller) {
  std::vector<std::string> names;
  for (int i = 0; i < 40; ++i)
    names.push_back("std::vector<std::basic_string<char>>::_M_realloc_insert_level_" +
                    std::to_string(i));
  std::vector<loupe_frame> frames;
  for (std::size_t i = 0; i < names.size(); ++i)
    frames.push_back(
        {0x1000u + i, names[i].c_str(), "/bin/x", 0, LOUPE_FRAME_USER, LOUPE_RESOLVED_SYMTAB});
  SampleRecord s(LOUPE_RECORD_STACK_SAMPLE, "cpu");
  s.builder()
      .label("pid", "4242")
      .label("comm", "gzip")
      .frames(frames.data(), static_cast<std::uint32_t>(frames.size()))
      .value("samples", "count", 7)
      .value("time_ns", "ns", 70000000);
  std::string text = final_report({&s});
  std::string row = line_with(text, "level_0");
  EXPECT_LE(display_width(row), 120u) << text;
  EXPECT_TRUE(has(row, "[gzip 4242]")) << "a task is said as perf says it: " << text;
  EXPECT_TRUE(has(row, "70.0 ms")) << text;
  EXPECT_TRUE(has(row, "_level_1")) << "the caller: " << text;
  EXPECT_TRUE(has(row, " more")) << "the frames left out are counted: " << text;
}

// An off-CPU stack: the scheduler's frames above the syscall, then the program's. When the
// row cannot hold them all, the kernel leaf stays, the other kernel frames are counted and
// the user frames follow: `read` and its direct caller are the row's point (issue 32).
TEST_F(ConsoleSinkTest, KernelFramesThatDoNotFitGiveWayToTheProgramsOwn) {
  std::vector<std::string> kernel = {"__schedule",
                                     "schedule",
                                     "schedule_timeout",
                                     "wait_woken",
                                     "pipe_read_wait_for_data_locked",
                                     "pipe_read",
                                     "vfs_read",
                                     "ksys_read",
                                     "do_syscall_64",
                                     "entry_SYSCALL_64_after_hwframe"};
  std::vector<std::string> user = {"read", "read_site", "worker_loop", "start_thread", "clone3"};
  std::vector<loupe_frame> frames;
  for (const auto& k : kernel)
    frames.push_back({0xffffffff81000000u, k.c_str(), "[kernel]", 0, LOUPE_FRAME_KERNEL,
                      LOUPE_RESOLVED_KALLSYMS});
  for (const auto& u : user)
    frames.push_back(
        {0x401000u, u.c_str(), "/usr/bin/app", 0, LOUPE_FRAME_USER, LOUPE_RESOLVED_SYMTAB});
  SampleRecord s(LOUPE_RECORD_STACK_SAMPLE, "offcpu");
  s.builder()
      .label("pid", "4242")
      .label("comm", "app")
      .label("reason", "sleep")
      .frames(frames.data(), static_cast<std::uint32_t>(frames.size()))
      .value("offcpu_ns", "ns", 5000000)
      .value("time_ns", "ns", 5000000);
  host_.set("width", std::int64_t{100});
  std::string text = final_report({&s});
  std::string row = line_with(text, "read_site");
  EXPECT_LE(display_width(row), 100u) << text;
  EXPECT_TRUE(has(row, " kernel;read;read_site;")) << text;
  EXPECT_FALSE(has(text, "time_ns")) << "a value equal to the first in every row: " << text;

  // Wide enough for everything: every frame, nothing counted.
  host_.set("width", std::int64_t{400});
  text = final_report({&s});
  EXPECT_TRUE(has(text, "__schedule;schedule;schedule_timeout;wait_woken")) << text;
  EXPECT_TRUE(has(text, "entry_SYSCALL_64_after_hwframe;read;read_site;worker_loop")) << text;
  EXPECT_FALSE(has(text, " kernel;")) << text;
}

// offwaketime's layout (waker root..leaf, "--", wakee leaf..root) reads as two stacks, leaf
// first each: the wakee's in the row, its waker's on the line below.
TEST_F(ConsoleSinkTest, AWakeeStackAndItsWakersReadLeafFirst) {
  std::vector<loupe_frame> frames;
  for (const char* w : {"writer_main", "write_site", "write"})  // waker, root first
    frames.push_back({0x401000u, w, "/usr/bin/app", 0, LOUPE_FRAME_USER, LOUPE_RESOLVED_SYMTAB});
  frames.push_back({0, "--", nullptr, 0, LOUPE_FRAME_KERNEL, LOUPE_UNRESOLVED_NOT_ATTEMPTED});
  for (const char* w : {"read", "read_site", "reader_main"})  // wakee, leaf first
    frames.push_back({0x402000u, w, "/usr/bin/app", 0, LOUPE_FRAME_USER, LOUPE_RESOLVED_SYMTAB});
  SampleRecord s(LOUPE_RECORD_STACK_SAMPLE, "offcpu_wakers");
  s.builder()
      .label("pid", "10")
      .label("comm", "reader")
      .label("waker_pid", "11")
      .label("waker_comm", "writer")
      .frames(frames.data(), static_cast<std::uint32_t>(frames.size()))
      .value("offcpu_ns", "ns", 1000);
  std::string text = final_report({&s});
  std::string row = line_with(text, "read_site");
  EXPECT_TRUE(has(row, "[reader 10,waker=writer 11] read;read_site;reader_main")) << text;
  EXPECT_TRUE(has(text, "⇐ woken by write;write_site;writer_main")) << text;
}

// A report at the defaults is one screen: past `lines` (60), a stack profiler's secondary
// tables (its histograms, a second stack table) are left out first, counted, and then the
// primary stacks show fewer rows, each cut still counted; a note says how to see it all.
TEST_F(ConsoleSinkTest, AReportLongerThanItsLinesIsCutAndSaysSo) {
  std::deque<SampleRecord> recs;
  for (int i = 0; i < 30; ++i) {
    const std::string pid = std::to_string(100 + i);
    recs.emplace_back(LOUPE_RECORD_HISTOGRAM, "wait");
    recs.back()
        .builder()
        .label("pid", pid)
        .histogram(LOUPE_BUCKETS_LOG2, 0, "ns",
                   {{1024, 2048, 1}, {4096, 8192, 2}, {16384, 32768, 3}, {65536, 131072, 4}},
                   std::uint64_t(10), 0, 1500, 100000);
    std::vector<loupe_frame> frames = {{0x401000u + static_cast<unsigned>(i), "leaf", "/bin/x", 0,
                                        LOUPE_FRAME_USER, LOUPE_RESOLVED_SYMTAB}};
    frames[0].symbol = nullptr;
    frames[0].address = 0x401000u + static_cast<unsigned>(i) * 0x100;
    for (const char* name : {"blocked", "woken"}) {
      recs.emplace_back(LOUPE_RECORD_STACK_SAMPLE, name);
      recs.back().builder().label("pid", pid).frames(frames.data(), 1).value("ns", "ns", 1000 + i);
    }
  }
  std::string text = final_report(recs);
  EXPECT_LE(split_lines(text).size(), 60u) << text;
  EXPECT_TRUE(has(text, "(cut to 60 lines: ")) << text;
  EXPECT_TRUE(has(text, "console lines = 0 shows all")) << text;
  EXPECT_TRUE(has(text, "table(s) and histogram(s) left out to fit")) << text;
  EXPECT_TRUE(has(text, "1 more stack table(s) left out to fit")) << text;
  EXPECT_TRUE(has(text, "blocked  top")) << "the primary view, the first to arrive, stays\n"
                                         << text;
  EXPECT_FALSE(has(text, "woken  top")) << text;
  EXPECT_TRUE(has(text, "more stack(s)")) << text;

  host_.set("lines", std::int64_t{0});
  text = final_report(recs);
  EXPECT_GT(split_lines(text).size(), 60u) << text;
  EXPECT_FALSE(has(text, "cut to")) << text;
}

// A Python program's stacks read as its own call path: the native leaf kept short, the
// interpreter's frames between its functions folded; the flat table sums its functions
// (by name and file, whatever the line) by self and total, before the stacks.
TEST_F(ConsoleSinkTest, ALanguagesFramesAreTheRowAndTheFlatTableSumsItsFunctions) {
  struct F {
    const char* symbol;
    const char* module;
    std::uint64_t line;
    std::uint32_t kind;
  };
  auto stack = [](std::vector<F> fs) {
    std::vector<loupe_frame> out;
    for (const auto& f : fs)
      out.push_back(
          {0x500000u, f.symbol, f.module, f.line, f.kind,
           f.kind == LOUPE_FRAME_PYTHON ? LOUPE_RESOLVED_RUNTIME : LOUPE_RESOLVED_SYMTAB});
    return out;
  };
  const char* py = "/usr/bin/python3.11";
  const std::vector<F> interp = {{"_PyEval_EvalFrameDefault", py, 0, LOUPE_FRAME_USER},
                                 {"_PyFunction_Vectorcall", py, 0, LOUPE_FRAME_USER}};
  auto with_interp = [&](std::vector<F> head, const std::vector<F>& pyframes) {
    for (const auto& p : pyframes) {
      head.insert(head.end(), interp.begin(), interp.end());
      head.push_back(p);
    }
    head.push_back({"main", py, 0, LOUPE_FRAME_USER});
    return head;
  };
  const auto parse = stack(with_interp({{"sre_ucs1_match", py, 0, LOUPE_FRAME_USER},
                                        {"_sre_SRE_Pattern_match", py, 0, LOUPE_FRAME_USER}},
                                       {{"parse", "/srv/app.py", 3, LOUPE_FRAME_PYTHON},
                                        {"handle", "/srv/app.py", 11, LOUPE_FRAME_PYTHON},
                                        {"<module>", "/srv/app.py", 30, LOUPE_FRAME_PYTHON}}));
  const auto parse2 = stack(with_interp({{"sre_ucs1_match", py, 0, LOUPE_FRAME_USER}},
                                        {{"parse", "/srv/app.py", 4, LOUPE_FRAME_PYTHON},
                                         {"handle", "/srv/app.py", 11, LOUPE_FRAME_PYTHON},
                                         {"<module>", "/srv/app.py", 30, LOUPE_FRAME_PYTHON}}));
  const auto digest = stack(with_interp({{"sha256_update", py, 0, LOUPE_FRAME_USER}},
                                        {{"digest", "/srv/app.py", 7, LOUPE_FRAME_PYTHON},
                                         {"handle", "/srv/app.py", 13, LOUPE_FRAME_PYTHON},
                                         {"<module>", "/srv/app.py", 30, LOUPE_FRAME_PYTHON}}));
  std::deque<SampleRecord> recs;
  const std::vector<std::pair<const std::vector<loupe_frame>*, int>> rows = {
      {&parse, 50}, {&parse2, 20}, {&digest, 30}};
  for (const auto& [frames, n] : rows) {
    recs.emplace_back(LOUPE_RECORD_STACK_SAMPLE, "cpu");
    recs.back()
        .builder()
        .label("pid", "7")
        .frames(frames->data(), static_cast<std::uint32_t>(frames->size()))
        .value("samples", "", n);
  }
  host_.set("width", std::int64_t{120});
  const std::string text = final_report(recs);
  const std::string row = line_with(text, "parse (app.py:3)");
  EXPECT_TRUE(has(row,
                  "sre_ucs1_match;… +3 native;parse (app.py:3);handle (app.py:11);"
                  "<module> (app.py:30)"))
      << text;
  EXPECT_FALSE(has(text, "_PyEval_EvalFrameDefault")) << "the interpreter's loop is folded\n"
                                                      << text;
  // parse at two lines is one function: 70 of 100 self; handle is under all of them.
  EXPECT_TRUE(has(line_with(text, "parse (app.py)"), "70.0%")) << text;
  EXPECT_TRUE(has(line_with(text, "digest (app.py)"), "30.0%")) << text;
  EXPECT_LT(text.find("functions by self"), text.find("top 3 of 3 stacks")) << text;
}

// A caller that runs nothing itself but holds a large part (parse, under which a library's
// decoder runs) follows the functions by self, as perf report's children view has it; what
// every stack holds (handle, <module>) is left out.
TEST_F(ConsoleSinkTest, TheFlatTableNamesTheCallersThatHoldAPartAfterThoseThatRan) {
  const auto frames = [](std::vector<std::pair<const char*, const char*>> fs) {
    std::vector<loupe_frame> out;
    for (const auto& [sym, file] : fs)
      out.push_back({0x500000u, sym, file, 1, LOUPE_FRAME_PYTHON, LOUPE_RESOLVED_RUNTIME});
    return out;
  };
  const auto decode = frames({{"raw_decode", "/usr/lib/python3.11/json/decoder.py"},
                              {"parse", "/srv/app.py"},
                              {"handle", "/srv/app.py"},
                              {"<module>", "/srv/app.py"}});
  const auto digest =
      frames({{"digest", "/srv/app.py"}, {"handle", "/srv/app.py"}, {"<module>", "/srv/app.py"}});
  std::deque<SampleRecord> recs;
  for (const auto& [f, n] :
       std::vector<std::pair<const std::vector<loupe_frame>*, int>>{{&decode, 60}, {&digest, 40}}) {
    recs.emplace_back(LOUPE_RECORD_STACK_SAMPLE, "cpu");
    recs.back()
        .builder()
        .label("pid", "7")
        .frames(f->data(), static_cast<std::uint32_t>(f->size()))
        .value("samples", "", n);
  }
  host_.set("width", std::int64_t{120});
  const std::string text = final_report(recs);
  EXPECT_TRUE(has(line_with(text, "raw_decode (decoder.py)"), "60.0%")) << text;
  const std::string parse = line_with(text, "parse (app.py)");
  EXPECT_TRUE(has(parse, "0.0%") && has(parse, "60.0%")) << text;
  EXPECT_LT(text.find("digest (app.py)"), text.find("parse (app.py)")) << text;
  EXPECT_FALSE(has(text, "handle (app.py)\n")) << "every stack holds it\n" << text;
}

TEST(ConsoleWrapLine, BreaksAtSeparatorsAndLosesNothing) {
  std::string line = "VERDICT: data lost or degraded at 3 place(s): ";
  for (int i = 0; i < 12; ++i)
    line += "lost_kernel@ring:component_" + std::to_string(i) + " (17), ";
  std::vector<std::string> lines = wrap_line(line, 80);
  ASSERT_GT(lines.size(), 1u);
  std::string joined;
  for (const auto& l : lines) {
    EXPECT_LE(display_width(l), 80u) << l;
    joined += l.substr(l.find_first_not_of(' ')) + " ";
  }
  for (int i = 0; i < 12; ++i)
    EXPECT_NE(joined.find("component_" + std::to_string(i) + " (17)"), std::string::npos) << joined;
  EXPECT_EQ(wrap_line("short", 80), std::vector<std::string>{"short"});
}

TEST_F(ConsoleSinkTest, StacksThatReadTheSameAreOneRow) {
  // Samples at different addresses of the same functions (an unsymbolized one named by
  // its function's start, as Debian's binaries are) read the same and are one row: the
  // hot function ranks first instead of being spread over rows that look alike.
  host_.set("top", std::int64_t{1});
  PluginInstance sink(lib_);
  ASSERT_EQ(sink.setup(host_), LOUPE_OK) << sink.last_error();
  auto sample = [&](std::uint64_t leaf, const char* fn, std::int64_t v) {
    loupe_frame f[2] = {
        {leaf, fn, "/usr/bin/gzip", 0, LOUPE_FRAME_USER, LOUPE_RESOLVED_SYMTAB},
        {0x30, "main", "/usr/bin/gzip", 0, LOUPE_FRAME_USER, LOUPE_RESOLVED_SYMTAB}};
    SampleRecord s(LOUPE_RECORD_STACK_SAMPLE, "cpu");
    s.builder().frames(f, 2).value("samples", "count", v);
    ASSERT_EQ(sink.consume(s.record()), LOUPE_OK);
  };
  for (std::uint64_t pc = 0x4710; pc < 0x4710 + 10; ++pc) sample(pc, "[fn@0x4710]", 3);
  sample(0x4290, "[fn@0x4290]", 20);
  ASSERT_EQ(sink.flush(true), LOUPE_OK);
  std::string text = report();
  EXPECT_TRUE(has(text, "cpu  top 1 of 2 stacks by samples, total 50")) << text;
  EXPECT_TRUE(has(line_with(text, "[fn@0x4710];main"), "30  60.0%")) << text;
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

// Verbose mode adds the table of every event name; a field that repeats a label of its
// record is printed once.
TEST_F(ConsoleSinkTest, VerboseEventsHaveASummaryTableAndNoRepeatedLabels) {
  host_.set("verbose", true);
  PluginInstance sink(lib_);
  ASSERT_EQ(sink.setup(host_), LOUPE_OK) << sink.last_error();
  SampleRecord e(LOUPE_RECORD_EVENT, "outlier");
  e.builder()
      .label("target", "nanosleep")
      .event_time(kWindowStart)
      .field_u("duration_ns", 51800000)
      .field("target", std::string("nanosleep"))
      .field("pid", std::int64_t{42});
  ASSERT_EQ(sink.consume(e.record()), LOUPE_OK);
  ASSERT_EQ(sink.flush(true), LOUPE_OK);
  std::string text = report();
  EXPECT_TRUE(has(line_with(text, "outlier  "), "1  51.8 ms  duration_ns")) << text;
  std::string row = line_with(text, "51.8 ms  target=nanosleep");
  EXPECT_TRUE(has(row, "pid=42")) << text;
  EXPECT_EQ(row.find("target="), row.rfind("target=")) << row;
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

// Records say their window: running totals start with the session, increments with their
// interval. An interval report counts the interval in every column: `calls` sent as a total
// (1,861 since the start) stands beside the interval histogram's count (465) as 465.
TEST_F(ConsoleSinkTest, AnIntervalReportCountsTheIntervalInEverySection) {
  constexpr std::uint64_t s = 1'000'000'000ull;
  host_.session()->start_wall_ns = kWindowStart;
  host_.session()->interval_s = 1;
  PluginInstance sink(lib_);
  ASSERT_EQ(sink.setup(host_), LOUPE_OK) << sink.last_error();
  auto feed = [&](SampleRecord&& r, std::uint64_t from, std::uint64_t to) {
    r.window(from, to);
    ASSERT_EQ(sink.consume(r.record(false, "latency")), LOUPE_OK);
  };
  auto interval = [&](std::uint64_t n, double calls, double rate, std::uint64_t files) {
    const std::uint64_t from = kWindowStart + (n - 1) * s, to = kWindowStart + n * s;
    SampleRecord c(LOUPE_RECORD_METRIC, "calls");
    c.builder().label("target", "read").metric(LOUPE_METRIC_COUNTER, "count", calls);
    feed(std::move(c), kWindowStart, to);  // since the start
    SampleRecord g(LOUPE_RECORD_METRIC, "match_rate");
    g.builder().label("target", "read").metric(LOUPE_METRIC_GAUGE, "ratio", rate);
    feed(std::move(g), kWindowStart, to);
    SampleRecord h(LOUPE_RECORD_HISTOGRAM, "latency");
    std::uint64_t k = n == 1 ? 1396 : 465;  // this interval's
    h.builder()
        .label("target", "read")
        .histogram(LOUPE_BUCKETS_LOG2, 0, "ns", {{1025, 2049, k}}, k, k * 1500, 1100, 2000);
    feed(std::move(h), from, to);
    SampleRecord f(LOUPE_RECORD_HISTOGRAM, "file_latency");  // since the start
    f.builder()
        .label("path", "/etc/x")
        .histogram(LOUPE_BUCKETS_LOG2, 0, "ns", {{4097, 8193, files}}, files, files * 5000, 4100,
                   8000);
    feed(std::move(f), kWindowStart, to);
    ASSERT_EQ(sink.flush(false), LOUPE_OK);
  };
  interval(1, 1396, 1.0, 4);
  const std::size_t second = report().size();
  interval(2, 1861, 0.999, 10);
  std::string text = report().substr(second);
  EXPECT_TRUE(has(text, "loupe interval #2 · every 1.00 s · this interval")) << text;
  std::string row = line_with(text, "read ");
  EXPECT_TRUE(has(row, " 465 ")) << text;
  EXPECT_FALSE(has(text, "1,861")) << text;
  EXPECT_TRUE(has(text, "latency{target=read}  count 465")) << text;
  EXPECT_TRUE(has(text, "file_latency{path=/etc/x}  count 6")) << text;
  // A ratio over the whole session has no interval value: the table says so.
  EXPECT_TRUE(has(text, "since the session began: match_rate")) << text;

  // The final report covers the session: the records' totals, as sent.
  SampleRecord c(LOUPE_RECORD_METRIC, "calls");
  c.builder().label("target", "read").metric(LOUPE_METRIC_COUNTER, "count", 2000);
  c.window(kWindowStart, kWindowStart + 3 * s);
  ASSERT_EQ(sink.consume(c.record(true, "latency")), LOUPE_OK);
  ASSERT_EQ(sink.flush(true), LOUPE_OK);
  text = report().substr(report().find("loupe report"));
  EXPECT_TRUE(has(text, "loupe report · whole session")) << text;
  EXPECT_TRUE(has(line_with(text, "read "), "2,000")) << text;
  EXPECT_FALSE(has(text, "since the session began")) << text;
}

// Events arrive once, in the interval they happened: the final report lists the slowest of
// the whole session, not of its last interval.
TEST_F(ConsoleSinkTest, TheFinalReportListsTheSlowestEventsOfTheWholeSession) {
  host_.session()->interval_s = 1;
  PluginInstance sink(lib_);
  ASSERT_EQ(sink.setup(host_), LOUPE_OK) << sink.last_error();
  auto outlier = [&](std::uint64_t ms) {
    SampleRecord e(LOUPE_RECORD_EVENT, "outlier");
    e.builder().event_time(kWindowStart).field_u("duration_ns", ms * 1000000);
    ASSERT_EQ(sink.consume(e.record(false)), LOUPE_OK);
  };
  for (std::uint64_t ms : {14, 90, 12, 11, 13}) outlier(ms);
  ASSERT_EQ(sink.flush(false), LOUPE_OK);
  outlier(20);
  ASSERT_EQ(sink.flush(false), LOUPE_OK);
  // A producer that restates its events with the final report (a snapshot) keeps its own.
  SampleRecord snap(LOUPE_RECORD_EVENT, "lock");
  snap.builder().event_time(kWindowStart).field_u("wait_ns", 5000);
  ASSERT_EQ(sink.consume(snap.record(false)), LOUPE_OK);
  ASSERT_EQ(sink.flush(false), LOUPE_OK);
  ASSERT_EQ(sink.consume(snap.record(true)), LOUPE_OK);
  ASSERT_EQ(sink.flush(true), LOUPE_OK);
  std::string text = report().substr(report().find("loupe report"));
  EXPECT_TRUE(has(text, "slow calls: outlier, 3 slowest of 6 by duration_ns")) << text;
  EXPECT_LT(text.find("90.0 ms"), text.find("20.0 ms")) << text;
  EXPECT_LT(text.find("20.0 ms"), text.find("14.0 ms")) << text;
  EXPECT_TRUE(has(text, "slow calls: lock, 1 slowest of 1 by wait_ns")) << text;
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
