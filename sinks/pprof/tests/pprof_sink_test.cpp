// SPDX-License-Identifier: Apache-2.0
//
// The pprof sink as the core drives it, and its files as pprof's consumers read them:
// libprotobuf parses them against the vendored profile.proto (its descriptor set, built by
// protoc, loaded into a private pool so it cannot clash with the copy compiled into the
// sink), and
// `go tool pprof -top` must rank the functions as the records say.
#include <google/protobuf/descriptor.pb.h>
#include <google/protobuf/dynamic_message.h>
#include <google/protobuf/util/json_util.h>
#include <gtest/gtest.h>
#include <zlib.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>
#include <string>
#include <tuple>
#include <vector>

#include "dl_plugin.hpp"
#include "fake_host.hpp"
#include "sample_records.hpp"

namespace loupe::test {
namespace {

using nlohmann::json;

loupe_frame sym(const char* name, std::uint64_t addr, const char* module = "/usr/bin/app",
                loupe_frame_kind kind = LOUPE_FRAME_USER) {
  return loupe_frame{addr,
                     name,
                     module,
                     4,
                     static_cast<std::uint32_t>(kind),
                     kind == LOUPE_FRAME_KERNEL ? LOUPE_RESOLVED_KALLSYMS : LOUPE_RESOLVED_SYMTAB};
}

std::string gunzip(const std::string& in) {
  z_stream zs{};
  EXPECT_EQ(inflateInit2(&zs, 15 + 16), Z_OK);
  zs.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(in.data()));
  zs.avail_in = static_cast<uInt>(in.size());
  std::string out;
  char buf[65536];
  int rc = Z_OK;
  while (rc == Z_OK) {
    zs.next_out = reinterpret_cast<Bytef*>(buf);
    zs.avail_out = sizeof(buf);
    rc = inflate(&zs, Z_NO_FLUSH);
    out.append(buf, sizeof(buf) - zs.avail_out);
  }
  inflateEnd(&zs);
  EXPECT_EQ(rc, Z_STREAM_END) << "not a complete gzip stream";
  return out;
}

// Parses a .pb.gz with libprotobuf and returns it as proto3 JSON (int64 as strings).
json parse_profile(const std::string& path) {
  google::protobuf::FileDescriptorSet set;
  EXPECT_TRUE(set.ParseFromString(read_file(LOUPE_PROFILE_DESC))) << LOUPE_PROFILE_DESC;
  google::protobuf::DescriptorPool pool;
  for (const auto& f : set.file()) EXPECT_NE(pool.BuildFile(f), nullptr) << f.name();
  const auto* desc = pool.FindMessageTypeByName("perftools.profiles.Profile");
  EXPECT_NE(desc, nullptr);
  if (!desc) return {};
  google::protobuf::DynamicMessageFactory factory(&pool);
  std::unique_ptr<google::protobuf::Message> msg(factory.GetPrototype(desc)->New());
  std::string raw = gunzip(read_file(path));
  EXPECT_TRUE(msg->ParseFromString(raw)) << path << " is not a Profile message";
  google::protobuf::util::JsonPrintOptions opts;
  opts.preserve_proto_field_names = true;
  std::string text;
  EXPECT_TRUE(google::protobuf::util::MessageToJsonString(*msg, &text, opts).ok());
  return json::parse(text);
}

std::string run(const std::string& cmd) {
  std::string out;
  FILE* p = ::popen(cmd.c_str(), "r");
  if (!p) return out;
  char buf[4096];
  while (std::size_t n = std::fread(buf, 1, sizeof(buf), p)) out.append(buf, n);
  int rc = ::pclose(p);
  if (rc != 0) out += "\n[exit status " + std::to_string(rc) + "]";
  return out;
}

bool have_go() {
  return std::system("command -v go >/dev/null 2>&1") == 0;
}

// The rows of `go tool pprof -top`: (flat, function name), in pprof's order.
std::vector<std::pair<std::string, std::string>> top_rows(const std::string& out) {
  std::vector<std::pair<std::string, std::string>> rows;
  bool in_table = false;
  for (const auto& line : split_lines(out)) {
    if (line.find("flat%") != std::string::npos) {
      in_table = true;
      continue;
    }
    if (!in_table) continue;
    std::istringstream ss(line);
    std::string flat, flat_pct, sum_pct, cum, cum_pct, name;
    ss >> flat >> flat_pct >> sum_pct >> cum >> cum_pct;
    std::getline(ss >> std::ws, name);
    if (!name.empty()) rows.emplace_back(flat, name);
  }
  return rows;
}

class PprofSinkTest : public ::testing::Test {
 protected:
  PprofSinkTest() : lib_(LOUPE_PPROF_SO) { host_.set_output_dir(dir_.path()); }

  void start() { ASSERT_EQ(inst_.setup(host_), LOUPE_OK) << inst_.last_error(); }
  void feed(const std::string& name, std::vector<loupe_frame> frames,
            std::vector<std::tuple<std::string, std::string, std::int64_t>> values,
            std::vector<std::pair<std::string, std::string>> labels = {}, bool is_final = true) {
    SampleRecord r(LOUPE_RECORD_STACK_SAMPLE, name);
    r.builder().frames(frames.data(), static_cast<std::uint32_t>(frames.size()));
    for (const auto& [n, u, v] : values) r.builder().value(n, u, v);
    for (const auto& [k, v] : labels) r.builder().label(k, v);
    ASSERT_EQ(inst_.consume(r.record(is_final, "oncpu")), LOUPE_OK) << inst_.last_error();
  }
  // A CPU profile: spin() dominates, then parse(), then a kernel stack.
  void feed_cpu() {
    feed("cpu", {sym("spin", 0x401010), sym("work", 0x401100), sym("main", 0x401200)},
         {{"samples", "count", 60}, {"cpu", "ns", 600'000'000}}, {{"comm", "app"}});
    feed("cpu", {sym("spin", 0x401010), sym("work", 0x401100), sym("main", 0x401200)},
         {{"samples", "count", 10}, {"cpu", "ns", 100'000'000}}, {{"comm", "app"}});
    feed("cpu", {sym("parse", 0x401300), sym("main", 0x401200)},
         {{"samples", "count", 25}, {"cpu", "ns", 250'000'000}}, {{"comm", "app"}});
    feed("cpu",
         {sym("copy_user_generic", 0xffffffff81000010ull, "[kernel]", LOUPE_FRAME_KERNEL),
          loupe_frame{0x7f0000012345, nullptr, "/usr/lib/x86_64-linux-gnu/libc.so.6", 0x12345,
                      LOUPE_FRAME_USER, LOUPE_UNRESOLVED_NO_SYMBOL},
          sym("main", 0x401200)},
         {{"samples", "count", 5}, {"cpu", "ns", 50'000'000}}, {{"comm", "app"}});
  }

  DlPlugin lib_;
  FakeHost host_;
  TempDir dir_;
  PluginInstance inst_{lib_};
};

std::int64_t total_samples(const json& p) {
  std::int64_t total = 0;
  for (const auto& sample : p["sample"]) total += std::stoll(sample["value"][0].get<std::string>());
  return total;
}

// [session] rotate: a window's profile holds the interval records (deltas) of that window
// alone, spans it, and the session's file the final records.
TEST_F(PprofSinkTest, RotatingSessionWritesEachWindowsProfileAlone) {
  host_.set_rotate(1);
  start();
  const std::string w1 = dir_.file("w1"), w2 = dir_.file("w2");
  std::filesystem::create_directory(w1);
  std::filesystem::create_directory(w2);
  SampleRecord a(LOUPE_RECORD_STACK_SAMPLE, "cpu");
  std::vector<loupe_frame> frames = {sym("spin", 0x401010), sym("main", 0x401200)};
  a.builder().frames(frames.data(), 2).value("samples", "count", 7);
  ASSERT_EQ(inst_.consume(a.window(1000, 2000).record(false, "oncpu")), LOUPE_OK);
  ASSERT_EQ(inst_.consume(a.window(2000, 3000).record(false, "oncpu")), LOUPE_OK);
  ASSERT_EQ(inst_.end_window(w1, 1000, 3000), LOUPE_OK) << inst_.last_error();
  ASSERT_EQ(inst_.consume(a.window(3000, 4000).record(false, "oncpu")), LOUPE_OK);
  ASSERT_EQ(inst_.end_window(w2, 3000, 4000), LOUPE_OK) << inst_.last_error();
  ASSERT_EQ(inst_.consume(a.window(1000, 4000).record(true, "oncpu")), LOUPE_OK);
  ASSERT_EQ(inst_.flush(true), LOUPE_OK);
  json p1 = parse_profile(w1 + "/cpu.pb.gz"), p2 = parse_profile(w2 + "/cpu.pb.gz");
  EXPECT_EQ(total_samples(p1), 14);
  EXPECT_EQ(p1["time_nanos"], "1000");
  EXPECT_EQ(p1["duration_nanos"], "2000");
  EXPECT_EQ(total_samples(p2), 7);
  EXPECT_EQ(p2["time_nanos"], "3000");
  EXPECT_EQ(total_samples(parse_profile(dir_.file("cpu.pb.gz"))), 7);
}

TEST_F(PprofSinkTest, ProfileParsesWithLibprotobufAgainstTheSchema) {
  start();
  feed_cpu();
  ASSERT_EQ(inst_.flush(true), LOUPE_OK) << inst_.last_error();
  ASSERT_TRUE(std::filesystem::exists(dir_.file("cpu.pb.gz")));
  json p = parse_profile(dir_.file("cpu.pb.gz"));
  const auto& st = p["string_table"];
  ASSERT_FALSE(st.empty());
  EXPECT_EQ(st[0], "");
  auto s = [&](const json& idx) {
    return st.at(std::stoul(idx.get<std::string>())).get<std::string>();
  };

  ASSERT_EQ(p["sample_type"].size(), 2u);
  EXPECT_EQ(s(p["sample_type"][0]["type"]), "samples");
  EXPECT_EQ(s(p["sample_type"][0]["unit"]), "count");
  EXPECT_EQ(s(p["sample_type"][1]["type"]), "cpu");
  EXPECT_EQ(s(p["sample_type"][1]["unit"]), "nanoseconds");
  EXPECT_EQ(s(p["default_sample_type"]), "samples");
  EXPECT_EQ(p["time_nanos"], std::to_string(kWindowStart));
  EXPECT_EQ(p["duration_nanos"], std::to_string(kWindowEnd - kWindowStart));

  // Identical stacks with identical labels merged: 3 distinct stacks.
  ASSERT_EQ(p["sample"].size(), 3u);
  std::int64_t total = 0, total_ns = 0;
  for (const auto& sample : p["sample"]) {
    ASSERT_EQ(sample["value"].size(), 2u);
    total += std::stoll(sample["value"][0].get<std::string>());
    total_ns += std::stoll(sample["value"][1].get<std::string>());
    ASSERT_EQ(sample["label"].size(), 1u);
    EXPECT_EQ(s(sample["label"][0]["key"]), "comm");
    EXPECT_EQ(s(sample["label"][0]["str"]), "app");
  }
  EXPECT_EQ(total, 100);
  EXPECT_EQ(total_ns, 1'000'000'000);

  std::set<std::string> functions, mappings;
  for (const auto& f : p["function"]) functions.insert(s(f["name"]));
  for (const auto& m : p["mapping"]) mappings.insert(s(m["filename"]));
  EXPECT_EQ(functions, (std::set<std::string>{"spin", "work", "main", "parse", "copy_user_generic",
                                              "libc.so.6+0x12345"}));
  EXPECT_EQ(mappings, (std::set<std::string>{"/usr/bin/app", "[kernel]",
                                             "/usr/lib/x86_64-linux-gnu/libc.so.6"}));
  // main appears in every stack but is one location: locations are shared, not copied.
  EXPECT_EQ(p["location"].size(), 6u);
  for (const auto& loc : p["location"]) {
    EXPECT_NE(loc.value("mapping_id", "0"), "0");
    EXPECT_EQ(loc["line"].size(), 1u);
  }
}

TEST_F(PprofSinkTest, GoToolPprofTopRanksTheHottestFunctionsFirst) {
  if (!have_go())
    GTEST_SKIP() << "go (golang-go) not installed: scripts/install-deps.sh installs it";
  start();
  feed_cpu();
  ASSERT_EQ(inst_.flush(true), LOUPE_OK) << inst_.last_error();
  std::string out =
      run("HOME=" + dir_.path() + " GOCACHE=" + dir_.path() +
          "/gocache go tool pprof -symbolize=none -top " + dir_.file("cpu.pb.gz") + " 2>&1");
  SCOPED_TRACE(out);
  EXPECT_NE(out.find("Type: samples"), std::string::npos);
  EXPECT_NE(out.find("100 total"), std::string::npos);
  auto rows = top_rows(out);
  ASSERT_GE(rows.size(), 3u);
  EXPECT_EQ(rows[0], (std::pair<std::string, std::string>{"70", "spin"}));
  EXPECT_EQ(rows[1], (std::pair<std::string, std::string>{"25", "parse"}));
  EXPECT_EQ(rows[2], (std::pair<std::string, std::string>{"5", "copy_user_generic"}));

  // The second sample type, with its unit understood by pprof.
  std::string ns =
      run("HOME=" + dir_.path() + " go tool pprof -symbolize=none -sample_index=cpu -top " +
          dir_.file("cpu.pb.gz") + " 2>&1");
  SCOPED_TRACE(ns);
  EXPECT_NE(ns.find("Type: cpu"), std::string::npos);
  auto ns_rows = top_rows(ns);
  ASSERT_GE(ns_rows.size(), 1u);
  EXPECT_EQ(ns_rows[0], (std::pair<std::string, std::string>{"700ms", "spin"}));
  EXPECT_NE(ns.find("1000ms total"), std::string::npos);
}

TEST_F(PprofSinkTest, AllocationProfileHasBytesAndCountTypesAndOneFilePerRecordName) {
  if (!have_go())
    GTEST_SKIP() << "go (golang-go) not installed: scripts/install-deps.sh installs it";
  start();
  feed("allocs", {sym("malloc", 0x1000, "/lib/libc.so.6"), sym("leaky", 0x2000)},
       {{"alloc_count", "count", 1000}, {"alloc_bytes", "bytes", 4 << 20}});
  feed("allocs", {sym("malloc", 0x1000, "/lib/libc.so.6"), sym("tidy", 0x3000)},
       {{"alloc_count", "count", 3000}, {"alloc_bytes", "bytes", 1 << 20}});
  feed("lock_wait", {sym("pthread_mutex_lock", 0x5000, "/lib/libc.so.6"), sym("worker", 0x6000)},
       {{"wait", "ns", 2'000'000}});
  ASSERT_EQ(inst_.flush(true), LOUPE_OK) << inst_.last_error();
  ASSERT_TRUE(std::filesystem::exists(dir_.file("allocs.pb.gz")));
  ASSERT_TRUE(std::filesystem::exists(dir_.file("lock_wait.pb.gz")));

  std::string bytes = run("HOME=" + dir_.path() +
                          " go tool pprof -symbolize=none -sample_index=alloc_bytes -cum -top " +
                          dir_.file("allocs.pb.gz") + " 2>&1");
  SCOPED_TRACE(bytes);
  EXPECT_NE(bytes.find("5MB total"), std::string::npos);
  auto rows = top_rows(bytes);
  ASSERT_GE(rows.size(), 3u);
  EXPECT_EQ(rows[0].second, "malloc");
  EXPECT_EQ(rows[1].second, "leaky");  // 4 MB cumulative, ahead of tidy's 1 MB

  std::string count =
      run("HOME=" + dir_.path() + " go tool pprof -symbolize=none -sample_index=alloc_count -top " +
          dir_.file("allocs.pb.gz") + " 2>&1");
  EXPECT_NE(count.find("4000 total"), std::string::npos) << count;

  std::string wait = run("HOME=" + dir_.path() + " go tool pprof -symbolize=none -top " +
                         dir_.file("lock_wait.pb.gz") + " 2>&1");
  EXPECT_NE(wait.find("Type: wait"), std::string::npos) << wait;
  EXPECT_NE(wait.find("2ms total"), std::string::npos) << wait;
}

TEST_F(PprofSinkTest, IntervalRecordsAreSkippedUnlessFinalOnlyIsOff) {
  start();
  feed("cpu", {sym("a", 0x10)}, {{"samples", "count", 100}}, {}, /*is_final=*/false);
  ASSERT_EQ(inst_.flush(false), LOUPE_OK);
  EXPECT_FALSE(std::filesystem::exists(dir_.file("cpu.pb.gz")));
  feed("cpu", {sym("a", 0x10)}, {{"samples", "count", 7}});
  ASSERT_EQ(inst_.flush(true), LOUPE_OK);
  json p = parse_profile(dir_.file("cpu.pb.gz"));
  ASSERT_EQ(p["sample"].size(), 1u);
  EXPECT_EQ(p["sample"][0]["value"][0], "7");
}

TEST_F(PprofSinkTest, OtherRecordKindsWriteNothing) {
  start();
  SampleRecord m(LOUPE_RECORD_METRIC, "events");
  m.builder().metric(LOUPE_METRIC_COUNTER, "count", 5);
  ASSERT_EQ(inst_.consume(m.record()), LOUPE_OK);
  auto h = latency_histogram();
  ASSERT_EQ(inst_.consume(h.record()), LOUPE_OK);
  ASSERT_EQ(inst_.flush(true), LOUPE_OK);
  EXPECT_TRUE(std::filesystem::is_empty(dir_.path()));
}

TEST_F(PprofSinkTest, UnwritableOutputDirIsAClearError) {
  host_.set_output_dir(dir_.file("missing/dir"));
  start();
  feed("cpu", {sym("a", 0x10)}, {{"samples", "count", 1}});
  EXPECT_NE(inst_.flush(true), LOUPE_OK);
  EXPECT_NE(inst_.last_error().find("missing/dir/cpu.pb.gz"), std::string::npos)
      << inst_.last_error();
}

}  // namespace
}  // namespace loupe::test
