// SPDX-License-Identifier: Apache-2.0
//
// The prometheus sink as the core drives it, and its endpoint as Prometheus reads it:
// exact exposition lines over HTTP, `promtool check metrics` on the served text, bearer
// token refusal, and a real Prometheus server scraping it on loopback.
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <httplib.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <regex>
#include <string>
#include <thread>

#include <google/protobuf/descriptor.h>
#include <google/protobuf/descriptor.pb.h>
#include <google/protobuf/dynamic_message.h>
#include <google/protobuf/io/zero_copy_stream_impl_lite.h>
#include <google/protobuf/util/delimited_message_util.h>
#include <google/protobuf/util/json_util.h>

#include "dl_plugin.hpp"
#include "fake_host.hpp"
#include "prometheus_server.hpp"
#include "sample_records.hpp"

namespace loupe::test {
namespace {

using nlohmann::json;

bool have(const char* tool) {
  return std::system((std::string("command -v ") + tool + " >/dev/null 2>&1").c_str()) == 0;
}

SampleRecord metric(const char* name, loupe_metric_type type, const char* unit, double v,
                    std::vector<std::pair<std::string, std::string>> labels = {}) {
  SampleRecord r(LOUPE_RECORD_METRIC, name);
  r.builder().metric(type, unit, v);
  for (auto& [k, val] : labels) r.builder().label(k, val);
  return r;
}

class PrometheusSinkTest : public ::testing::Test {
 protected:
  PrometheusSinkTest() : lib_(LOUPE_PROMETHEUS_SO) {
    host_.set_output_dir(dir_.path());
    host_.set("listen", std::string("127.0.0.1:0"));
  }

  void start() {
    ASSERT_EQ(inst_.setup(host_), LOUPE_OK) << inst_.last_error();
    std::smatch m;
    for (const auto& [level, msg] : host_.logs())
      if (std::regex_search(msg, m, std::regex(R"(http://127\.0\.0\.1:(\d+)/metrics)")))
        port_ = std::stoi(m[1]);
    ASSERT_GT(port_, 0) << "the sink did not log the address it serves";
  }
  void feed(SampleRecord r, bool is_final = true) {
    ASSERT_EQ(inst_.consume(r.record(is_final)), LOUPE_OK) << inst_.last_error();
  }
  // The standard record set: a latency histogram, a counter, a gauge, an event, health.
  void feed_all() {
    feed(latency_histogram());
    feed(metric("syscalls", LOUPE_METRIC_COUNTER, "count", 12345, {{"syscall", "read"}}));
    feed(metric("syscalls", LOUPE_METRIC_COUNTER, "count", 77, {{"syscall", "write"}}));
    feed(metric("queue_depth", LOUPE_METRIC_GAUGE, "count", 3));
    feed(metric("rss", LOUPE_METRIC_GAUGE, "bytes", 1048576));
    SampleRecord ev(LOUPE_RECORD_EVENT, "slow_read");
    ev.builder().event_time(kWindowStart).field("duration_ns", std::int64_t{13000000});
    feed(std::move(ev));
    feed(health(LOUPE_HEALTH_WARN, "ring_lost_kernel", "latency/outliers", 17, "reserve failed"));
    feed(health(LOUPE_HEALTH_OK, "ring_received", "latency/outliers", 5000));
  }
  httplib::Result get(const std::string& token = {}) {
    httplib::Client c("127.0.0.1", port_);
    c.set_connection_timeout(5);
    c.set_read_timeout(5);
    httplib::Headers h;
    if (!token.empty()) h.emplace("Authorization", "Bearer " + token);
    return c.Get("/metrics", h);
  }
  std::string scrape() {
    auto r = get();
    EXPECT_TRUE(r) << "no HTTP answer from port " << port_;
    if (!r) return {};
    EXPECT_EQ(r->status, 200);
    EXPECT_EQ(r->get_header_value("Content-Type"), "text/plain; version=0.0.4; charset=utf-8");
    return r->body;
  }

  DlPlugin lib_;
  FakeHost host_;
  TempDir dir_;
  PluginInstance inst_{lib_};
  int port_ = 0;
};

bool has_line(const std::string& text, const std::string& line) {
  for (const auto& l : split_lines(text))
    if (l == line) return true;
  return false;
}

TEST_F(PrometheusSinkTest, ServesEveryRecordKindInTheTextFormat) {
  start();
  feed_all();
  std::string text = scrape();
  SCOPED_TRACE(text);
  // Histogram: ns converted to seconds, cumulative counts, +Inf = count. The bounds are a
  // fixed grid, powers of two from 1.024 us to 68.7 s, every one served whether its count is
  // 0 or not: a bound that appeared later, holding the counts below it, would skew rate().
  EXPECT_TRUE(has_line(text, "# TYPE loupe_latency_seconds histogram"));
  EXPECT_TRUE(has_line(
      text, R"(loupe_latency_seconds_bucket{plugin="testplug",comm="dd",le="1.024e-06"} 0)"));
  EXPECT_TRUE(has_line(
      text, R"(loupe_latency_seconds_bucket{plugin="testplug",comm="dd",le="2.048e-06"} 100)"));
  EXPECT_TRUE(has_line(
      text, R"(loupe_latency_seconds_bucket{plugin="testplug",comm="dd",le="4.096e-06"} 150)"));
  EXPECT_TRUE(has_line(
      text, R"(loupe_latency_seconds_bucket{plugin="testplug",comm="dd",le="6.5536e-05"} 150)"));
  EXPECT_TRUE(has_line(
      text, R"(loupe_latency_seconds_bucket{plugin="testplug",comm="dd",le="0.000131072"} 151)"));
  EXPECT_TRUE(has_line(
      text, R"(loupe_latency_seconds_bucket{plugin="testplug",comm="dd",le="68.719476736"} 151)"));
  std::size_t bounds = 0;
  for (const auto& l : split_lines(text))
    if (l.rfind("loupe_latency_seconds_bucket{", 0) == 0) ++bounds;
  EXPECT_EQ(bounds, 27u + 1) << "2^10 .. 2^36 ns and +Inf";
  EXPECT_TRUE(
      has_line(text, R"(loupe_latency_seconds_bucket{plugin="testplug",comm="dd",le="+Inf"} 151)"));
  EXPECT_TRUE(has_line(text, R"(loupe_latency_seconds_sum{plugin="testplug",comm="dd"} 0.0003)"));
  EXPECT_TRUE(has_line(text, R"(loupe_latency_seconds_count{plugin="testplug",comm="dd"} 151)"));
  EXPECT_TRUE(has_line(text, "# TYPE loupe_syscalls_total counter"));
  EXPECT_TRUE(has_line(text, R"(loupe_syscalls_total{plugin="testplug",syscall="read"} 12345)"));
  EXPECT_TRUE(has_line(text, R"(loupe_syscalls_total{plugin="testplug",syscall="write"} 77)"));
  EXPECT_TRUE(has_line(text, "# TYPE loupe_queue_depth gauge"));
  EXPECT_TRUE(has_line(text, R"(loupe_queue_depth{plugin="testplug"} 3)"));
  EXPECT_TRUE(has_line(text, R"(loupe_rss_bytes{plugin="testplug"} 1048576)"));
  EXPECT_TRUE(has_line(text, R"(loupe_slow_read_events_total{plugin="testplug"} 1)"));
  EXPECT_TRUE(has_line(
      text, R"(loupe_health_ring_lost_kernel{plugin="testplug",component="latency/outliers"} 17)"));
  EXPECT_TRUE(has_line(
      text, R"(loupe_health_ring_received{plugin="testplug",component="latency/outliers"} 5000)"));
  EXPECT_TRUE(has_line(
      text,
      R"(loupe_health_severity{plugin="testplug",check="ring_lost_kernel",component="latency/outliers",severity="warn"} 1)"));
  EXPECT_TRUE(has_line(
      text,
      R"(loupe_health_severity{plugin="testplug",check="ring_received",component="latency/outliers",severity="ok"} 0)"));
  // One HELP and one TYPE per family, even with several series: the records' 8 and
  // loupe's own up, session_running and reports_total.
  EXPECT_EQ(std::count(text.begin(), text.end(), '#'), 2 * (8 + 3));
}

TEST_F(PrometheusSinkTest, PromtoolAcceptsTheExposition) {
  if (!have("promtool")) GTEST_SKIP() << "promtool (package prometheus) not installed";
  start();
  feed_all();
  feed(metric("lock wait/ns", LOUPE_METRIC_COUNTER, "ns", 2500, {{"cgroup.path", "a\"b\\c"}}));
  std::string path = dir_.file("metrics.txt");
  std::ofstream(path) << scrape();
  FILE* p = ::popen(("promtool check metrics < " + path + " 2>&1").c_str(), "r");
  ASSERT_NE(p, nullptr);
  std::string out;
  char buf[4096];
  while (std::size_t n = std::fread(buf, 1, sizeof(buf), p)) out.append(buf, n);
  int rc = ::pclose(p);
  EXPECT_EQ(rc, 0) << out << "\n---\n" << read_file(path);
  EXPECT_EQ(out, "") << "promtool lint findings:\n" << out;
}

TEST_F(PrometheusSinkTest, NamesAndLabelsAreSanitizedAndEscaped) {
  start();
  feed(metric("lock wait/ns", LOUPE_METRIC_COUNTER, "ns", 2500,
              {{"cgroup.path", "a\"b\\c\nd"}, {"__name__", "x"}, {"plugin", "spoof"}}));
  std::string text = scrape();
  EXPECT_TRUE(has_line(
      text,
      R"(loupe_lock_wait_seconds_total{plugin="testplug",cgroup_path="a\"b\\c\nd",_name_="x"} 2.5e-06)"))
      << text;
}

TEST_F(PrometheusSinkTest, LatestValueOfEachSeriesWins) {
  start();
  feed(metric("syscalls", LOUPE_METRIC_COUNTER, "count", 5), /*is_final=*/false);
  EXPECT_TRUE(has_line(scrape(), R"(loupe_syscalls_total{plugin="testplug"} 5)"));
  feed(metric("syscalls", LOUPE_METRIC_COUNTER, "count", 9));
  EXPECT_TRUE(has_line(scrape(), R"(loupe_syscalls_total{plugin="testplug"} 9)"));
  feed(metric("queue_depth", LOUPE_METRIC_GAUGE, "count", 7), false);
  feed(metric("queue_depth", LOUPE_METRIC_GAUGE, "count", 2), false);
  EXPECT_TRUE(has_line(scrape(), R"(loupe_queue_depth{plugin="testplug"} 2)"));
}

// Records say which window they cover: from the session's start (totals) or from a later
// interval's start (that interval's increments). Prometheus needs both as totals for the
// life of the endpoint: an interval histogram served as is drops at every report, and
// rate() and histogram_quantile() read each drop as a counter reset.
TEST_F(PrometheusSinkTest, CountersAndHistogramsStayCumulativeWhateverWindowTheirRecordsCover) {
  constexpr std::uint64_t s = 1'000'000'000ull;
  host_.session()->start_wall_ns = kWindowStart;
  start();
  auto hist = [&](std::uint64_t from, std::uint64_t to, std::vector<loupe_bucket> buckets) {
    std::uint64_t n = 0, sum = 0;
    for (const auto& b : buckets) {
      n += b.count;
      sum += b.count * b.lower;
    }
    SampleRecord h(LOUPE_RECORD_HISTOGRAM, "latency");
    h.builder()
        .label("target", "read")
        .histogram(LOUPE_BUCKETS_LOG2, 0, "ns", buckets, n, sum, buckets.front().lower,
                   buckets.back().lower);
    h.window(from, to);
    return h;
  };
  auto counter = [&](const char* name, double v, std::uint64_t from, std::uint64_t to) {
    SampleRecord c = metric(name, LOUPE_METRIC_COUNTER, "count", v);
    c.window(from, to);
    return c;
  };
  // Interval 1 (its window starts the session), interval 2, interval 3: increments.
  feed(hist(kWindowStart, kWindowStart + s, {{1025, 2049, 3}}), false);
  feed(counter("deltas", 4, kWindowStart, kWindowStart + s), false);
  feed(counter("totals", 10, kWindowStart, kWindowStart + s), false);
  feed(hist(kWindowStart + s, kWindowStart + 2 * s, {{1025, 2049, 1}, {4097, 8193, 2}}), false);
  feed(counter("deltas", 6, kWindowStart + s, kWindowStart + 2 * s), false);
  feed(counter("totals", 25, kWindowStart, kWindowStart + 2 * s), false);
  std::string text = scrape();
  EXPECT_TRUE(has_line(text, R"(loupe_latency_seconds_count{plugin="testplug",target="read"} 6)"))
      << text;
  EXPECT_TRUE(has_line(
      text, R"(loupe_latency_seconds_bucket{plugin="testplug",target="read",le="2.048e-06"} 4)"))
      << text;
  EXPECT_TRUE(has_line(
      text, R"(loupe_latency_seconds_bucket{plugin="testplug",target="read",le="8.192e-06"} 6)"))
      << text;
  EXPECT_TRUE(
      has_line(text, R"(loupe_latency_seconds_sum{plugin="testplug",target="read"} 1.2294e-05)"))
      << text;
  EXPECT_TRUE(has_line(text, R"(loupe_deltas_total{plugin="testplug"} 10)")) << text;
  EXPECT_TRUE(has_line(text, R"(loupe_totals_total{plugin="testplug"} 25)")) << text;

  // A third interval with nothing new for the histogram; the totals of a producer that
  // lost an entry never take a counter back.
  feed(hist(kWindowStart + 2 * s, kWindowStart + 3 * s, {{1025, 2049, 1}}), false);
  feed(counter("totals", 20, kWindowStart, kWindowStart + 3 * s), false);
  text = scrape();
  EXPECT_TRUE(has_line(text, R"(loupe_latency_seconds_count{plugin="testplug",target="read"} 7)"))
      << text;
  EXPECT_TRUE(has_line(text, R"(loupe_totals_total{plugin="testplug"} 25)")) << text;

  // The final report covers the session: totals, which replace the sum of the increments.
  feed(hist(kWindowStart, kWindowStart + 4 * s, {{1025, 2049, 5}, {4097, 8193, 3}}));
  feed(counter("deltas", 12, kWindowStart, kWindowStart + 4 * s));
  text = scrape();
  EXPECT_TRUE(has_line(text, R"(loupe_latency_seconds_count{plugin="testplug",target="read"} 8)"))
      << text;
  EXPECT_TRUE(has_line(
      text, R"(loupe_latency_seconds_bucket{plugin="testplug",target="read",le="2.048e-06"} 5)"))
      << text;
  EXPECT_TRUE(has_line(text, R"(loupe_deltas_total{plugin="testplug"} 12)")) << text;
}

TEST_F(PrometheusSinkTest, TheFirstScrapeBeforeAnyReportHasLoupesOwnSeries) {
  host_.session()->start_wall_ns = kWindowStart;
  start();
  std::string text = scrape();
  EXPECT_TRUE(has_line(text, "loupe_up 1")) << text;
  EXPECT_TRUE(has_line(text, "loupe_session_running 1")) << text;
  EXPECT_TRUE(has_line(text, "loupe_reports_total 0")) << text;
  EXPECT_TRUE(has_line(text, "loupe_session_start_time_seconds 1700000000")) << text;
  ASSERT_EQ(inst_.flush(false), LOUPE_OK);
  EXPECT_TRUE(has_line(scrape(), "loupe_reports_total 1"));
  ASSERT_EQ(inst_.flush(true), LOUPE_OK);
  text = scrape();
  EXPECT_TRUE(has_line(text, "loupe_reports_total 2")) << text;
  EXPECT_TRUE(has_line(text, "loupe_session_running 0")) << text;
}

// A total beside its parts under one name: sum(rate(loupe_syscalls_total[1m])) would count
// every syscall twice. The second record name is refused, with a warning naming both.
TEST_F(PrometheusSinkTest, TwoRecordNamesNeverShareAFamily) {
  start();
  feed(metric("syscalls", LOUPE_METRIC_COUNTER, "count", 5, {{"syscall", "read"}}));
  feed(metric("syscalls_total", LOUPE_METRIC_COUNTER, "count", 9));
  std::string text = scrape();
  EXPECT_TRUE(has_line(text, R"(loupe_syscalls_total{plugin="testplug",syscall="read"} 5)"))
      << text;
  EXPECT_FALSE(has_line(text, R"(loupe_syscalls_total{plugin="testplug"} 9)")) << text;
  bool warned = false;
  for (const auto& [level, msg] : host_.logs())
    warned |= level == LOUPE_LOG_WARN &&
              msg.find("record 'syscalls_total' needs a name of its own") != std::string::npos;
  EXPECT_TRUE(warned);
}

TEST_F(PrometheusSinkTest, TypeClashIsSkippedWithAWarning) {
  start();
  feed(metric("depth", LOUPE_METRIC_GAUGE, "count", 1));
  SampleRecord h(LOUPE_RECORD_HISTOGRAM, "depth");
  h.builder().histogram(LOUPE_BUCKETS_LOG2, 0, "", {{1, 2, 1}}, 1, 1, 1, 1);
  feed(std::move(h));  // named loupe_depth too, but a histogram
  std::string text = scrape();
  EXPECT_TRUE(has_line(text, "# TYPE loupe_depth gauge")) << text;
  EXPECT_EQ(text.find("loupe_depth_bucket"), std::string::npos) << text;
  bool warned = false;
  for (const auto& [level, msg] : host_.logs())
    warned |= level == LOUPE_LOG_WARN && msg.find("'loupe_depth' is a gauge") != std::string::npos;
  EXPECT_TRUE(warned);
}

TEST_F(PrometheusSinkTest, BearerTokenIsRequiredWhenSet) {
  host_.set("token", std::string("s3cret"));
  start();
  feed(metric("up_things", LOUPE_METRIC_GAUGE, "count", 1));
  auto none = get();
  ASSERT_TRUE(none);
  EXPECT_EQ(none->status, 401);
  EXPECT_EQ(none->get_header_value("WWW-Authenticate"), "Bearer realm=\"loupe\"");
  EXPECT_EQ(none->body.find("loupe_up_things"), std::string::npos);
  auto wrong = get("s3cre");
  ASSERT_TRUE(wrong);
  EXPECT_EQ(wrong->status, 401);
  auto right = get("s3cret");
  ASSERT_TRUE(right);
  EXPECT_EQ(right->status, 200);
  EXPECT_NE(right->body.find("loupe_up_things"), std::string::npos);
}

TEST_F(PrometheusSinkTest, BadOrTakenListenAddressFailsSetupClearly) {
  host_.set("listen", std::string("127.0.0.1:http"));
  EXPECT_EQ(inst_.setup(host_), LOUPE_ERR_INVALID_ARG);
  EXPECT_NE(inst_.last_error().find("port must be a number"), std::string::npos)
      << inst_.last_error();

  FakeHost first_host;
  first_host.set("listen", std::string("127.0.0.1:0"));
  PluginInstance first(lib_);
  ASSERT_EQ(first.setup(first_host), LOUPE_OK);
  std::smatch m;
  std::string taken;
  for (const auto& [level, msg] : first_host.logs())
    if (std::regex_search(msg, m, std::regex(R"(127\.0\.0\.1:(\d+))"))) taken = m[1];
  ASSERT_FALSE(taken.empty());
  FakeHost second_host;
  second_host.set("listen", "127.0.0.1:" + taken);
  PluginInstance second(lib_);
  EXPECT_EQ(second.setup(second_host), LOUPE_ERR_RESOURCE);
  EXPECT_NE(second.last_error().find("cannot listen on 127.0.0.1:" + taken), std::string::npos)
      << second.last_error();
}

// A real Prometheus server scrapes the sink every second over loopback; its query API
// must return the series, a quantile computed from the buckets, and a value that moved.
TEST_F(PrometheusSinkTest, RealPrometheusServerScrapesTheSink) {
  if (!have("prometheus")) GTEST_SKIP() << "prometheus (package prometheus) not installed";
  host_.set("token", std::string("t0ken"));
  start();
  feed_all();
  feed(metric("requests", LOUPE_METRIC_COUNTER, "count", 5), /*is_final=*/false);
  PrometheusServer server(dir_.path(), port_, "t0ken");
  auto non_empty = [](const json& r) { return r.is_array() && !r.empty(); };

  json r = server.wait_for(R"(loupe_latency_seconds_count{comm="dd",job="loupe"})", non_empty,
                           std::chrono::seconds(25));
  ASSERT_TRUE(non_empty(r)) << "no series after 25 s; server log:\n" << server.log();
  EXPECT_EQ(value_of(r), 151);
  EXPECT_EQ(r[0]["metric"]["plugin"], "testplug");

  // p50 from the buckets: 75.5 of 151 values fall in the first bucket (<= 2.047 us).
  json q = server.query("histogram_quantile(0.5, loupe_latency_seconds_bucket)");
  ASSERT_TRUE(non_empty(q));
  EXPECT_GT(value_of(q), 0.0);
  EXPECT_LE(value_of(q), 2.047e-6);
  json sev = server.query(R"(loupe_health_severity{check="ring_lost_kernel"})");
  ASSERT_TRUE(non_empty(sev));
  EXPECT_EQ(value_of(sev), 1);
  EXPECT_EQ(sev[0]["metric"]["severity"], "warn");
  json up = server.query(R"(up{job="loupe"})");
  ASSERT_TRUE(non_empty(up));
  EXPECT_EQ(value_of(up), 1);

  // A later report moves the value: the endpoint is live, not a snapshot of setup time.
  feed(metric("requests", LOUPE_METRIC_COUNTER, "count", 9));
  json moved = server.wait_for(
      "loupe_requests_total", [&](const json& res) { return non_empty(res) && value_of(res) == 9; },
      std::chrono::seconds(15));
  ASSERT_TRUE(non_empty(moved));
  EXPECT_EQ(value_of(moved), 9);
}

}  // namespace
}  // namespace loupe::test

namespace loupe::test {
namespace {

// Length-delimited MetricFamily messages, as a protobuf scraper reads them, parsed against
// the sink's metrics.proto in a private pool (the sink's own generated classes already
// hold the process-wide one) and given back as JSON by family name: field names as in the
// .proto, 64-bit integers as strings, fields that were not set absent.
std::map<std::string, json> decode_families(const std::string& body) {
  std::map<std::string, json> out;
  google::protobuf::FileDescriptorSet set;
  EXPECT_TRUE(set.ParseFromString(read_file(LOUPE_METRICS_DESC))) << LOUPE_METRICS_DESC;
  google::protobuf::DescriptorPool pool;
  for (const auto& f : set.file()) EXPECT_NE(pool.BuildFile(f), nullptr) << f.name();
  const auto* desc = pool.FindMessageTypeByName("io.prometheus.client.MetricFamily");
  EXPECT_NE(desc, nullptr);
  if (!desc) return out;
  google::protobuf::DynamicMessageFactory factory(&pool);
  google::protobuf::io::ArrayInputStream raw(body.data(), static_cast<int>(body.size()));
  while (true) {
    std::unique_ptr<google::protobuf::Message> mf(factory.GetPrototype(desc)->New());
    bool clean_eof = false;
    if (!google::protobuf::util::ParseDelimitedFromZeroCopyStream(mf.get(), &raw, &clean_eof)) {
      EXPECT_TRUE(clean_eof) << "a truncated or malformed message";
      break;
    }
    google::protobuf::util::JsonPrintOptions opts;
    opts.preserve_proto_field_names = true;
    std::string text;
    EXPECT_TRUE(google::protobuf::util::MessageToJsonString(*mf, &text, opts).ok());
    json j = json::parse(text);
    out[j.value("name", "")] = j;
  }
  return out;
}

std::int64_t i64(const json& v) {  // a 64-bit field: a JSON string
  return std::stoll(v.get<std::string>());
}

constexpr const char* kPrometheusAccept =  // what Prometheus 2.42 sends with native histograms
    "application/vnd.google.protobuf;proto=io.prometheus.client.MetricFamily;encoding=delimited;"
    "q=0.7,text/plain;version=0.0.4;q=0.3,*/*;q=0.2";

class PrometheusProtobufTest : public PrometheusSinkTest {
 protected:
  // A protobuf histogram's classic buckets: upper bound -> cumulative count.
  static std::map<double, std::uint64_t> classic_buckets(const json& h) {
    std::map<double, std::uint64_t> out;
    for (const auto& b : h["bucket"])
      out[b["upper_bound"].get<double>()] = std::stoull(b["cumulative_count"].get<std::string>());
    return out;
  }
  httplib::Result get_as(const std::string& accept) {
    httplib::Client c("127.0.0.1", port_);
    c.set_read_timeout(5);
    return c.Get("/metrics", httplib::Headers{{"Accept", accept}});
  }
  // Log2 buckets as the BPF side fills them: {0} x3, {1}, (1024, 2048] x5, (2048, 4096] x2,
  // (65536, 131072].
  SampleRecord log2_histogram(const char* name, const char* unit) {
    SampleRecord r(LOUPE_RECORD_HISTOGRAM, name);
    r.builder().histogram(
        LOUPE_BUCKETS_LOG2, 0, unit,
        {{0, 1, 3}, {1, 2, 1}, {1025, 2049, 5}, {2049, 4097, 2}, {65537, 131073, 1}}, 12, 80000, 0,
        70000);
    return r;
  }
};

TEST_F(PrometheusProtobufTest, AcceptHeaderChoosesTheFormat) {
  start();
  feed(metric("syscalls", LOUPE_METRIC_COUNTER, "count", 7));
  auto proto = get_as(kPrometheusAccept);
  ASSERT_TRUE(proto);
  EXPECT_EQ(proto->get_header_value("Content-Type"),
            "application/vnd.google.protobuf; proto=io.prometheus.client.MetricFamily; "
            "encoding=delimited");
  auto families = decode_families(proto->body);
  ASSERT_TRUE(families.count("loupe_syscalls_total"));
  const json& c = families["loupe_syscalls_total"];
  EXPECT_EQ(c["type"], "COUNTER");
  EXPECT_EQ(c["metric"][0]["counter"]["value"], 7);
  EXPECT_EQ(c["metric"][0]["label"][0]["name"], "plugin");
  // Old scrapers, browsers, text preferred by weight, or a protobuf of another message.
  for (const char* accept :
       {"", "*/*", "text/plain;version=0.0.4",
        "application/vnd.google.protobuf;proto=io.prometheus.client.MetricFamily;"
        "encoding=delimited;q=0.2,text/plain;q=0.5",
        "application/vnd.google.protobuf;proto=other.Message;encoding=delimited",
        "application/vnd.google.protobuf;proto=io.prometheus.client.MetricFamily;encoding=text",
        "application/vnd.google.protobuf;proto=io.prometheus.client.MetricFamily;"
        "encoding=delimited;q=zero"}) {
    auto r = get_as(accept);
    ASSERT_TRUE(r);
    EXPECT_EQ(r->get_header_value("Content-Type"), "text/plain; version=0.0.4; charset=utf-8")
        << accept;
    EXPECT_TRUE(has_line(r->body, R"(loupe_syscalls_total{plugin="testplug"} 7)")) << accept;
  }
}

TEST_F(PrometheusProtobufTest, Log2BucketsAreExactlySchemaZeroWithTheirClassicBuckets) {
  start();
  feed(log2_histogram("request_size", "bytes"));
  auto families = decode_families(get_as(kPrometheusAccept)->body);
  ASSERT_TRUE(families.count("loupe_request_size_bytes"));
  const json& f = families["loupe_request_size_bytes"];
  EXPECT_EQ(f["type"], "HISTOGRAM");
  const json& h = f["metric"][0]["histogram"];
  SCOPED_TRACE(h.dump());
  EXPECT_EQ(i64(h["sample_count"]), 12);
  EXPECT_EQ(h["sample_sum"], 80000);
  EXPECT_EQ(h["schema"], 0);
  EXPECT_EQ(h["zero_threshold"], 0);
  EXPECT_EQ(i64(h["zero_count"]), 3);
  // Index 0 = (0.5, 1], 11 = (1024, 2048], 12 = (2048, 4096], 17 = (65536, 131072]: an
  // off-by-one in the convention would start at 1 or put 2048 in index 12.
  EXPECT_EQ(h["positive_span"], json::parse(R"([{"offset":0,"length":1},{"offset":10,"length":2},
                                                 {"offset":4,"length":1}])"));
  EXPECT_EQ(h["positive_delta"], json::parse(R"(["1","4","-3","-1"])"));
  EXPECT_FALSE(h.contains("negative_span"));
  // The classic buckets ride along, cumulative, on the fixed grid: 0, then every power of
  // two to 2^32, the empty ones too.
  const auto classic = classic_buckets(h);
  EXPECT_EQ(classic.size(), 34u);
  EXPECT_EQ(classic.at(0), 3u);
  EXPECT_EQ(classic.at(1), 4u);
  EXPECT_EQ(classic.at(1024), 4u);
  EXPECT_EQ(classic.at(2048), 9u);
  EXPECT_EQ(classic.at(4096), 11u);
  EXPECT_EQ(classic.at(65536), 11u);
  EXPECT_EQ(classic.at(131072), 12u);
  EXPECT_EQ(classic.at(4294967296.0), 12u);
}

TEST_F(PrometheusProtobufTest, TimeHistogramsGetANativeTwinInTheirRecordedUnit) {
  start();
  feed(log2_histogram("latency", "ns"));
  auto families = decode_families(get_as(kPrometheusAccept)->body);
  // Seconds: classic only, 2^k ns is no power of two in seconds.
  ASSERT_TRUE(families.count("loupe_latency_seconds"));
  const json& s = families["loupe_latency_seconds"]["metric"][0]["histogram"];
  EXPECT_FALSE(s.contains("positive_span")) << s.dump();
  EXPECT_FALSE(s.contains("schema")) << s.dump();
  EXPECT_EQ(classic_buckets(s).at(2.048e-06), 9u);
  EXPECT_EQ(classic_buckets(s).size(), 27u) << "1.024 us .. 68.7 s";
  ASSERT_TRUE(families.count("loupe_latency_nanoseconds"));
  const json& n = families["loupe_latency_nanoseconds"]["metric"][0]["histogram"];
  EXPECT_EQ(n["schema"], 0);
  EXPECT_EQ(i64(n["zero_count"]), 3);
  EXPECT_EQ(n["positive_span"].size(), 3u);
  EXPECT_EQ(classic_buckets(n).at(2048), 9u);
  EXPECT_EQ(n["sample_sum"], 80000);
  // The text format keeps the names it always had.
  std::string text = scrape();
  EXPECT_EQ(text.find("nanoseconds"), std::string::npos) << text;
  EXPECT_TRUE(has_line(text, R"(loupe_latency_seconds_count{plugin="testplug"} 12)")) << text;
}

TEST_F(PrometheusProtobufTest, BucketsThatStraddleAPowerOfTwoStayClassic) {
  start();
  SampleRecord lin(LOUPE_RECORD_HISTOGRAM, "depth");  // log2-linear parts sum per octave
  lin.builder().histogram(LOUPE_BUCKETS_LOG2_LINEAR, 8, "count",
                          {{3, 4, 1}, {17, 19, 2}, {19, 21, 1}, {31, 33, 4}}, 8, 170, 3, 32);
  feed(std::move(lin));
  SampleRecord odd(LOUPE_RECORD_HISTOGRAM, "queue");  // [1024, 2048) = (1023, 2047]
  odd.builder().histogram(LOUPE_BUCKETS_EXPLICIT, 0, "count", {{1024, 2048, 2}}, 2, 3000, 1024,
                          2000);
  feed(std::move(odd));
  SampleRecord mixed(LOUPE_RECORD_HISTOGRAM, "mixed");  // 0 with 1
  mixed.builder().histogram(LOUPE_BUCKETS_EXPLICIT, 0, "count", {{0, 2, 2}}, 2, 1, 0, 1);
  feed(std::move(mixed));
  auto families = decode_families(get_as(kPrometheusAccept)->body);
  const json& d = families["loupe_depth"]["metric"][0]["histogram"];
  EXPECT_EQ(d["schema"], 0) << d.dump();
  // 3 in index 2; (16, 18], (18, 20] and (30, 32] all in index 5 = (16, 32].
  EXPECT_EQ(d["positive_span"],
            json::parse(R"([{"offset":2,"length":1},{"offset":2,"length":1}])"));
  EXPECT_EQ(d["positive_delta"], json::parse(R"(["1","6"])"));
  for (const char* name : {"loupe_queue", "loupe_mixed"}) {
    const json& h = families[name]["metric"][0]["histogram"];
    EXPECT_FALSE(h.contains("positive_span")) << name << h.dump();
    EXPECT_FALSE(h.contains("schema")) << name;
    EXPECT_EQ(i64(h["sample_count"]), 2) << name;
  }
  // Classic, on the grid: [1024, 2048) is at or below 2048, not below 1024.
  const auto queue = classic_buckets(families["loupe_queue"]["metric"][0]["histogram"]);
  EXPECT_EQ(queue.at(1024), 0u);
  EXPECT_EQ(queue.at(2048), 2u);
}

}  // namespace
}  // namespace loupe::test
