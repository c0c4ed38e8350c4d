// SPDX-License-Identifier: Apache-2.0
//
// The folded sink as the core drives it: records in through consume(), files out on flush().
#include <gtest/gtest.h>

#include <filesystem>
#include <string>
#include <vector>

#include "dl_plugin.hpp"
#include "fake_host.hpp"
#include "sample_records.hpp"

namespace loupe::test {
namespace {

loupe_frame sym(const char* name, loupe_frame_kind kind = LOUPE_FRAME_USER) {
  return loupe_frame{0x1000,
                     name,
                     "/usr/bin/app",
                     4,
                     static_cast<std::uint32_t>(kind),
                     kind == LOUPE_FRAME_KERNEL ? LOUPE_RESOLVED_KALLSYMS : LOUPE_RESOLVED_SYMTAB};
}
loupe_frame unresolved(const char* module, std::uint64_t offset) {
  return loupe_frame{0x7f00, nullptr, module, offset, LOUPE_FRAME_USER, LOUPE_UNRESOLVED_NO_SYMBOL};
}
loupe_frame unknown() {
  return loupe_frame{0x10, nullptr, nullptr, 0x10, LOUPE_FRAME_USER, LOUPE_UNRESOLVED_NO_MODULE};
}

struct Sample {
  std::string name;
  std::vector<loupe_frame> frames;  // leaf first, as records hold them
  std::vector<std::pair<std::string, std::int64_t>> values;
  std::string comm;
  bool is_final = true;
};

class FoldedSinkTest : public ::testing::Test {
 protected:
  FoldedSinkTest() : lib_(LOUPE_FOLDED_SO) { host_.set_output_dir(dir_.path()); }

  void start() { ASSERT_EQ(inst_.setup(host_), LOUPE_OK) << inst_.last_error(); }
  void feed(const Sample& s) {
    SampleRecord r(LOUPE_RECORD_STACK_SAMPLE, s.name);
    r.builder().frames(s.frames.data(), static_cast<std::uint32_t>(s.frames.size()));
    for (const auto& [n, v] : s.values) r.builder().value(n, "count", v);
    if (!s.comm.empty()) r.builder().label("comm", s.comm);
    ASSERT_EQ(inst_.consume(r.record(s.is_final)), LOUPE_OK) << inst_.last_error();
  }
  std::vector<std::string> lines(const std::string& file) {
    return split_lines(read_file(dir_.file(file)));
  }

  DlPlugin lib_;
  FakeHost host_;
  TempDir dir_;
  PluginInstance inst_{lib_};
};

TEST_F(FoldedSinkTest, RootFirstAggregatedPerStackAndName) {
  start();
  std::vector<loupe_frame> stack = {sym("leaf"), sym("mid"), sym("main")};
  feed({"cpu", stack, {{"samples", 3}}});
  feed({"cpu", stack, {{"samples", 4}}});
  feed({"cpu", {sym("other"), sym("main")}, {{"samples", 1}}});
  feed({"offcpu", stack, {{"wait_ns", 500}}});
  ASSERT_EQ(inst_.flush(true), LOUPE_OK) << inst_.last_error();
  EXPECT_EQ(lines("cpu.folded"), (std::vector<std::string>{"main;mid;leaf 7", "main;other 1"}));
  EXPECT_EQ(lines("offcpu.folded"), (std::vector<std::string>{"main;mid;leaf 500"}));
}

TEST_F(FoldedSinkTest, KernelUnresolvedAndUnknownFrames) {
  start();
  std::vector<loupe_frame> stack = {
      sym("do_nanosleep", LOUPE_FRAME_KERNEL), sym("entry_SYSCALL_64", LOUPE_FRAME_KERNEL),
      unresolved("/usr/lib/x86_64-linux-gnu/libc.so.6", 0xe9a3f), unknown(), sym("main")};
  feed({"cpu", stack, {{"samples", 2}}});
  ASSERT_EQ(inst_.flush(true), LOUPE_OK);
  EXPECT_EQ(lines("cpu.folded"),
            (std::vector<std::string>{
                "main;[unknown];libc.so.6+0xe9a3f;entry_SYSCALL_64_[k];do_nanosleep_[k] 2"}));
}

TEST_F(FoldedSinkTest, ValueKeyPicksTheNamedValueAndSkipsRecordsWithoutIt) {
  host_.set("value", std::string("alloc_bytes"));
  start();
  feed({"allocs", {sym("malloc"), sym("leaky")}, {{"count", 1000}, {"alloc_bytes", 4096000}}});
  feed({"allocs", {sym("malloc"), sym("leaky")}, {{"count", 1}, {"alloc_bytes", 1048576}}});
  feed({"cpu", {sym("spin")}, {{"samples", 9}}});  // no alloc_bytes: not folded
  ASSERT_EQ(inst_.flush(true), LOUPE_OK);
  EXPECT_EQ(lines("allocs.folded"), (std::vector<std::string>{"leaky;malloc 5144576"}));
  EXPECT_FALSE(std::filesystem::exists(dir_.file("cpu.folded")));
}

TEST_F(FoldedSinkTest, IncludeCommRootsStacksAtTheProcessName) {
  host_.set("include_comm", true);
  start();
  feed({"cpu", {sym("work"), sym("main")}, {{"samples", 5}}, "server"});
  feed({"cpu", {sym("work"), sym("main")}, {{"samples", 2}}, "client"});
  ASSERT_EQ(inst_.flush(true), LOUPE_OK);
  EXPECT_EQ(lines("cpu.folded"),
            (std::vector<std::string>{"client;main;work 2", "server;main;work 5"}));
}

TEST_F(FoldedSinkTest, SinglePathRootsEachStackAtItsRecordName) {
  host_.set("path", std::string("all.folded"));
  start();
  feed({"alloc", {sym("f")}, {{"bytes", 10}}});
  feed({"free", {sym("f")}, {{"bytes", 4}}});
  ASSERT_EQ(inst_.flush(true), LOUPE_OK);
  EXPECT_EQ(lines("all.folded"), (std::vector<std::string>{"alloc;f 10", "free;f 4"}));
  EXPECT_FALSE(std::filesystem::exists(dir_.file("alloc.folded")));
}

TEST_F(FoldedSinkTest, IntervalReportsAreFoldedOnlyWhenAsked) {
  start();
  feed({"cpu", {sym("a")}, {{"samples", 100}}, "", /*is_final=*/false});
  feed({"cpu", {sym("a")}, {{"samples", 7}}});
  ASSERT_EQ(inst_.flush(true), LOUPE_OK);
  EXPECT_EQ(lines("cpu.folded"), (std::vector<std::string>{"a 7"}));
}

TEST_F(FoldedSinkTest, IntervalReportsFoldedWhenFinalOnlyIsOff) {
  host_.set("final_only", false);
  start();
  feed({"cpu", {sym("a")}, {{"samples", 100}}, "", /*is_final=*/false});
  ASSERT_EQ(inst_.flush(false), LOUPE_OK);
  EXPECT_EQ(lines("cpu.folded"), (std::vector<std::string>{"a 100"}));
  feed({"cpu", {sym("a")}, {{"samples", 7}}});
  ASSERT_EQ(inst_.flush(true), LOUPE_OK);
  EXPECT_EQ(lines("cpu.folded"), (std::vector<std::string>{"a 107"}));
}

TEST_F(FoldedSinkTest, SeparatorsInNamesAndFileNamesAreNeutralized) {
  start();
  feed({"lock/wait", {sym("ns::f(int; char)"), sym("main")}, {{"wait_ns", 3}}});
  ASSERT_EQ(inst_.flush(true), LOUPE_OK);
  EXPECT_EQ(lines("lock_wait.folded"), (std::vector<std::string>{"main;ns::f(int: char) 3"}));
}

TEST_F(FoldedSinkTest, OtherRecordKindsAreIgnored) {
  start();
  SampleRecord h(LOUPE_RECORD_METRIC, "events");
  h.builder().metric(LOUPE_METRIC_COUNTER, "count", 5);
  ASSERT_EQ(inst_.consume(h.record()), LOUPE_OK);
  ASSERT_EQ(inst_.flush(true), LOUPE_OK);
  EXPECT_TRUE(std::filesystem::is_empty(dir_.path()));
}

// [session] rotate: interval records (deltas) fold into the window they came in, each
// window's file holds that window alone, and the session's file the final records.
TEST_F(FoldedSinkTest, RotatingSessionWritesEachWindowAlone) {
  host_.set_rotate(1);
  start();
  const std::string w1 = dir_.file("w1"), w2 = dir_.file("w2");
  std::filesystem::create_directory(w1);
  std::filesystem::create_directory(w2);
  feed({"cpu", {sym("a"), sym("main")}, {{"samples", 3}}, "", false});
  ASSERT_EQ(inst_.flush(false), LOUPE_OK);  // an interval report inside the window
  feed({"cpu", {sym("a"), sym("main")}, {{"samples", 2}}, "", false});
  ASSERT_EQ(inst_.end_window(w1, 1, 2), LOUPE_OK) << inst_.last_error();
  feed({"cpu", {sym("b"), sym("main")}, {{"samples", 4}}, "", false});
  ASSERT_EQ(inst_.end_window(w2, 2, 3), LOUPE_OK) << inst_.last_error();
  feed({"cpu", {sym("a"), sym("main")}, {{"samples", 5}}, "", true});
  feed({"cpu", {sym("b"), sym("main")}, {{"samples", 4}}, "", true});
  ASSERT_EQ(inst_.flush(true), LOUPE_OK);
  EXPECT_EQ(lines("w1/cpu.folded"), (std::vector<std::string>{"main;a 5"}));
  EXPECT_EQ(lines("w2/cpu.folded"), (std::vector<std::string>{"main;b 4"}));
  EXPECT_EQ(lines("cpu.folded"), (std::vector<std::string>{"main;a 5", "main;b 4"}));
}

TEST_F(FoldedSinkTest, UnwritableDirectoryIsAClearError) {
  host_.set_output_dir("/nonexistent-loupe-dir");
  start();
  feed({"cpu", {sym("a")}, {{"samples", 1}}});
  EXPECT_NE(inst_.flush(true), LOUPE_OK);
  EXPECT_NE(inst_.last_error().find("/nonexistent-loupe-dir/cpu.folded"), std::string::npos)
      << inst_.last_error();
}

}  // namespace
}  // namespace loupe::test
