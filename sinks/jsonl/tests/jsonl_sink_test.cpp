// SPDX-License-Identifier: Apache-2.0
#include <gtest/gtest.h>

#include <filesystem>

#include <nlohmann/json.hpp>

#include "dl_plugin.hpp"
#include "fake_host.hpp"
#include "sample_records.hpp"

namespace loupe::test {
namespace {

using nlohmann::json;

class JsonlSinkTest : public ::testing::Test {
 protected:
  JsonlSinkTest() : lib_(LOUPE_JSONL_SO) { host_.set_output_dir(dir_.path()); }

  std::vector<json> lines_of(const std::string& path) {
    std::vector<json> out;
    for (const auto& line : split_lines(read_file(path))) out.push_back(json::parse(line));
    return out;
  }

  TempDir dir_;
  FakeHost host_;
  DlPlugin lib_;
};

TEST_F(JsonlSinkTest, DescriptorDeclaresItsKeys) {
  const loupe_plugin_descriptor* d = lib_.descriptor();
  EXPECT_STREQ(d->name, "jsonl");
  EXPECT_EQ(d->kind, static_cast<std::uint32_t>(LOUPE_KIND_SINK));
  ASSERT_EQ(d->n_config_keys, 2u);
  EXPECT_STREQ(d->config_keys[0].name, "path");
  EXPECT_STREQ(d->config_keys[0].default_value, "\"records.jsonl\"");
  EXPECT_STREQ(d->config_keys[1].name, "flush_every");
}

TEST_F(JsonlSinkTest, HistogramLineCarriesExactValues) {
  PluginInstance sink(lib_);
  ASSERT_EQ(sink.setup(host_), LOUPE_OK) << sink.last_error();
  SampleRecord h = latency_histogram();
  ASSERT_EQ(sink.consume(h.record()), LOUPE_OK);
  ASSERT_EQ(sink.flush(true), LOUPE_OK) << sink.last_error();

  auto lines = lines_of(dir_.file("records.jsonl"));
  ASSERT_EQ(lines.size(), 1u);
  const json& j = lines[0];
  EXPECT_EQ(j["schema"], "loupe.record/1");
  EXPECT_EQ(j["kind"], "histogram");
  EXPECT_EQ(j["plugin"], "testplug");
  EXPECT_EQ(j["name"], "latency");
  EXPECT_EQ(j["labels"], json({{"comm", "dd"}}));
  EXPECT_EQ(j["is_final"], true);
  EXPECT_EQ(j["window"]["start_ns"].get<std::uint64_t>(), kWindowStart);
  EXPECT_EQ(j["window"]["end_ns"].get<std::uint64_t>(), kWindowEnd);
  const json& hist = j["histogram"];
  EXPECT_EQ(hist["unit"], "ns");
  EXPECT_EQ(hist["scheme"], "log2");
  EXPECT_EQ(hist["sub_buckets"], 0);
  EXPECT_EQ(hist["count"], 151);
  EXPECT_EQ(hist["sum"], 300000);
  EXPECT_EQ(hist["min"], 1100);
  EXPECT_EQ(hist["max"], 70000);
  ASSERT_EQ(hist["buckets"].size(), 3u);
  EXPECT_EQ(hist["buckets"][1], json({{"lower", 2048}, {"upper", 4096}, {"count", 50}}));
  ASSERT_EQ(hist["percentiles"].size(), 5u);
  EXPECT_EQ(hist["percentiles"][4]["q"].get<double>(), 0.999);
  EXPECT_EQ(hist["percentiles"][4]["value"], 70000);
  EXPECT_EQ(hist["percentiles"][4]["lower"], 65536);
  EXPECT_EQ(hist["percentiles"][4]["upper"], 131072);
  EXPECT_FALSE(j.contains("stack"));
}

TEST_F(JsonlSinkTest, EveryKindRoundTrips) {
  PluginInstance sink(lib_);
  ASSERT_EQ(sink.setup(host_), LOUPE_OK) << sink.last_error();

  loupe_frame frames[2] = {
      {0xffffffff81000010ull, "do_sys_openat2", "[kernel]", 0x10, LOUPE_FRAME_KERNEL,
       LOUPE_RESOLVED_KALLSYMS},
      {0x7f0000001234ull, nullptr, "/usr/lib/libc.so.6", 0x1234, LOUPE_FRAME_USER,
       LOUPE_UNRESOLVED_NO_SYMBOL},
  };
  SampleRecord stack(LOUPE_RECORD_STACK_SAMPLE, "cpu");
  stack.builder()
      .label("pid", "42")
      .frames(frames, 2)
      .value("samples", "count", 7)
      .value("wait_ns", "ns", -5);
  SampleRecord event(LOUPE_RECORD_EVENT, "slow_read");
  event.builder()
      .event_time(kWindowStart + 123)
      .field_u("duration_ns", 18446744073709551615ull)
      .field("fd", std::int64_t{-3})
      .field("ratio", 0.25)
      .field("comm", std::string("d\"d"))
      .frames(frames, 1);
  SampleRecord metric(LOUPE_RECORD_METRIC, "syscalls");
  metric.builder().label("syscall", "read").metric(LOUPE_METRIC_COUNTER, "count", 12345);
  SampleRecord health_rec =
      health(LOUPE_HEALTH_WARN, "lost_kernel", "ring:outliers", 17, "reserve failed");

  ASSERT_EQ(sink.consume(stack.record(false)), LOUPE_OK);
  ASSERT_EQ(sink.consume(event.record()), LOUPE_OK);
  ASSERT_EQ(sink.consume(metric.record()), LOUPE_OK);
  ASSERT_EQ(sink.consume(health_rec.record()), LOUPE_OK);
  ASSERT_EQ(sink.flush(true), LOUPE_OK) << sink.last_error();

  auto lines = lines_of(dir_.file("records.jsonl"));
  ASSERT_EQ(lines.size(), 4u);

  const json& s = lines[0];
  EXPECT_EQ(s["kind"], "stack");
  EXPECT_EQ(s["is_final"], false);
  ASSERT_EQ(s["stack"]["frames"].size(), 2u);
  EXPECT_EQ(s["stack"]["frames"][0], json({{"address", 0xffffffff81000010ull},
                                           {"symbol", "do_sys_openat2"},
                                           {"module", "[kernel]"},
                                           {"offset", 0x10},
                                           {"kind", "kernel"},
                                           {"resolution", "kallsyms"}}));
  EXPECT_TRUE(s["stack"]["frames"][1]["symbol"].is_null());
  EXPECT_EQ(s["stack"]["frames"][1]["kind"], "user");
  EXPECT_EQ(s["stack"]["frames"][1]["resolution"], "no_symbol");
  EXPECT_EQ(s["stack"]["values"], json::parse(R"([{"name":"samples","unit":"count","value":7},
                            {"name":"wait_ns","unit":"ns","value":-5}])"));

  const json& e = lines[1];
  EXPECT_EQ(e["kind"], "event");
  EXPECT_EQ(e["event"]["timestamp_ns"].get<std::uint64_t>(), kWindowStart + 123);
  EXPECT_EQ(e["event"]["fields"]["duration_ns"].get<std::uint64_t>(), 18446744073709551615ull);
  EXPECT_EQ(e["event"]["fields"]["fd"].get<std::int64_t>(), -3);
  EXPECT_EQ(e["event"]["fields"]["ratio"].get<double>(), 0.25);
  EXPECT_EQ(e["event"]["fields"]["comm"], "d\"d");
  ASSERT_EQ(e["event"]["frames"].size(), 1u);
  EXPECT_EQ(e["event"]["frames"][0]["symbol"], "do_sys_openat2");

  const json& m = lines[2];
  EXPECT_EQ(m["kind"], "metric");
  EXPECT_EQ(m["labels"]["syscall"], "read");
  EXPECT_EQ(m["metric"], json({{"type", "counter"}, {"unit", "count"}, {"value", 12345.0}}));

  const json& h = lines[3];
  EXPECT_EQ(h["kind"], "health");
  EXPECT_EQ(h["name"], "lost_kernel");
  EXPECT_EQ(h["health"], json({{"severity", "warn"},
                               {"component", "ring:outliers"},
                               {"value", 17},
                               {"message", "reserve failed"}}));
}

// A loss with its whole and effect (ABI 1.11) carries them, for a program to take the share.
TEST_F(JsonlSinkTest, AHealthShareAndEffectAreWritten) {
  PluginInstance sink(lib_);
  ASSERT_EQ(sink.setup(host_), LOUPE_OK) << sink.last_error();
  SampleRecord rec = health_of(LOUPE_HEALTH_WARN, "stacks", "cpusample/unwind_bad_frame", 3, 196,
                               "stacks", LOUPE_HEALTH_EFFECT_DEGRADED);
  ASSERT_EQ(sink.consume(rec.record()), LOUPE_OK);
  ASSERT_EQ(sink.flush(true), LOUPE_OK) << sink.last_error();
  auto lines = lines_of(dir_.file("records.jsonl"));
  ASSERT_EQ(lines.size(), 1u);
  EXPECT_EQ(lines[0]["health"]["whole"], 196);
  EXPECT_EQ(lines[0]["health"]["whole_unit"], "stacks");
  EXPECT_EQ(lines[0]["health"]["effect"], "degraded");
}

TEST_F(JsonlSinkTest, WritesOnlyAtFlushByDefault) {
  PluginInstance sink(lib_);
  ASSERT_EQ(sink.setup(host_), LOUPE_OK) << sink.last_error();
  SampleRecord h = latency_histogram();
  ASSERT_EQ(sink.consume(h.record(false)), LOUPE_OK);
  ASSERT_EQ(sink.consume(h.record(false)), LOUPE_OK);
  EXPECT_EQ(read_file(dir_.file("records.jsonl")), "");
  ASSERT_EQ(sink.flush(false), LOUPE_OK);
  EXPECT_EQ(split_lines(read_file(dir_.file("records.jsonl"))).size(), 2u);
  ASSERT_EQ(sink.consume(h.record(true)), LOUPE_OK);
  ASSERT_EQ(sink.flush(true), LOUPE_OK);
  auto lines = lines_of(dir_.file("records.jsonl"));
  ASSERT_EQ(lines.size(), 3u);
  EXPECT_EQ(lines[2]["is_final"], true);
}

// [session] rotate: each window's interval records in its own file, moved into the window's
// directory when it ends; the session file keeps the final report alone.
TEST_F(JsonlSinkTest, RotatingSessionWritesEachWindowsRecordsIntoItsDirectory) {
  host_.set_rotate(1);
  PluginInstance sink(lib_);
  ASSERT_EQ(sink.setup(host_), LOUPE_OK) << sink.last_error();
  SampleRecord h = latency_histogram();
  const std::string w1 = dir_.file("w1"), w2 = dir_.file("w2"), w3 = dir_.file("w3");
  for (const auto& d : {w1, w2, w3}) std::filesystem::create_directory(d);
  ASSERT_EQ(sink.consume(h.record(false)), LOUPE_OK);
  ASSERT_EQ(sink.consume(h.record(false)), LOUPE_OK);
  ASSERT_EQ(sink.flush(false), LOUPE_OK);  // an interval report inside the window
  ASSERT_EQ(sink.consume(h.record(false)), LOUPE_OK);
  ASSERT_EQ(sink.end_window(w1, 1, 2), LOUPE_OK) << sink.last_error();
  ASSERT_EQ(sink.consume(h.record(false)), LOUPE_OK);
  ASSERT_EQ(sink.end_window(w2, 2, 3), LOUPE_OK) << sink.last_error();
  ASSERT_EQ(sink.end_window(w3, 3, 4), LOUPE_OK) << sink.last_error();  // nothing came
  ASSERT_EQ(sink.consume(h.record(true)), LOUPE_OK);
  ASSERT_EQ(sink.flush(true), LOUPE_OK);
  EXPECT_EQ(lines_of(w1 + "/records.jsonl").size(), 3u);
  EXPECT_EQ(lines_of(w2 + "/records.jsonl").size(), 1u);
  EXPECT_FALSE(std::filesystem::exists(w3 + "/records.jsonl"));
  auto session = lines_of(dir_.file("records.jsonl"));
  ASSERT_EQ(session.size(), 1u);
  EXPECT_EQ(session[0]["is_final"], true);
  for (const auto& e : std::filesystem::directory_iterator(dir_.path()))
    EXPECT_NE(e.path().filename().string().front(), '.') << "left behind: " << e.path();
}

TEST_F(JsonlSinkTest, FlushEveryWritesWithoutWaitingForFlush) {
  host_.set("flush_every", std::int64_t{2});
  host_.set("path", std::string("sub.jsonl"));
  PluginInstance sink(lib_);
  ASSERT_EQ(sink.setup(host_), LOUPE_OK) << sink.last_error();
  SampleRecord m(LOUPE_RECORD_METRIC, "m");
  m.builder().metric(LOUPE_METRIC_GAUGE, "bytes", 1.5);
  for (int i = 0; i < 3; ++i) ASSERT_EQ(sink.consume(m.record()), LOUPE_OK);
  EXPECT_EQ(split_lines(read_file(dir_.file("sub.jsonl"))).size(), 2u);
  ASSERT_EQ(sink.flush(true), LOUPE_OK);
  EXPECT_EQ(split_lines(read_file(dir_.file("sub.jsonl"))).size(), 3u);
}

TEST_F(JsonlSinkTest, InvalidUtf8IsReplacedNotFatal) {
  PluginInstance sink(lib_);
  ASSERT_EQ(sink.setup(host_), LOUPE_OK) << sink.last_error();
  SampleRecord e(LOUPE_RECORD_EVENT, "exec");
  e.builder().field("comm", std::string("bad\xff\xfe"));
  ASSERT_EQ(sink.consume(e.record()), LOUPE_OK);
  ASSERT_EQ(sink.flush(true), LOUPE_OK) << sink.last_error();
  auto lines = lines_of(dir_.file("records.jsonl"));
  ASSERT_EQ(lines.size(), 1u);
  EXPECT_EQ(lines[0]["event"]["fields"]["comm"].get<std::string>().substr(0, 3), "bad");
}

TEST_F(JsonlSinkTest, UnopenablePathFailsSetupNamingThePath) {
  host_.set("path", std::string("no/such/dir/records.jsonl"));
  PluginInstance sink(lib_);
  EXPECT_EQ(sink.setup(host_), LOUPE_ERR_NOT_FOUND);
  std::string err = sink.last_error();
  EXPECT_NE(err.find(dir_.path() + "/no/such/dir/records.jsonl"), std::string::npos) << err;
  EXPECT_NE(err.find("No such file or directory"), std::string::npos) << err;
}

TEST_F(JsonlSinkTest, FullDiskFailsFlushNamingThePathAndTheLoss) {
  host_.set("path", std::string("/dev/full"));
  PluginInstance sink(lib_);
  ASSERT_EQ(sink.setup(host_), LOUPE_OK) << sink.last_error();
  SampleRecord h = latency_histogram();
  ASSERT_EQ(sink.consume(h.record()), LOUPE_OK);
  EXPECT_EQ(sink.flush(true), LOUPE_ERR_RESOURCE);
  std::string err = sink.last_error();
  EXPECT_NE(err.find("/dev/full"), std::string::npos) << err;
  EXPECT_NE(err.find("No space left on device"), std::string::npos) << err;
  EXPECT_NE(err.find("1 records dropped"), std::string::npos) << err;
}

}  // namespace
}  // namespace loupe::test
