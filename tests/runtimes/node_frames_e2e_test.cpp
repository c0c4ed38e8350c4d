// SPDX-License-Identifier: Apache-2.0
//
// JavaScript functions in offcpu's and memalloc's stacks of a node started without any flag:
// the same walk as cpusample's, named from V8's own structures, and the memalloc stacks
// named after node exited (memalloc names its sites at the final report).
#include "cli_run.hpp"
#include "on_path.hpp"
#include "user_frames.hpp"

using loupe::test::CliRun;
using loupe::test::RunResult;
using nlohmann::json;

namespace {

// The JavaScript functions of a stack record, innermost first.
std::vector<std::string> js_frames(const json& rec) {
  std::vector<std::string> out;
  for (const auto& f : rec["stack"]["frames"])
    if (f.value("kind", "") == "js") out.push_back(loupe::test::frame_str(f, "symbol"));
  return out;
}

std::int64_t value_of(const json& rec, const std::string& name) {
  for (const auto& v : rec["stack"]["values"])
    if (v.value("name", "") == name) return v["value"].get<std::int64_t>();
  return 0;
}

// The workload's own JSON line.
json said(const RunResult& r) {
  for (const auto& line : loupe::test::json_lines(r.output))
    if (line.contains("waited_s") || line.contains("buffers")) return line;
  return json::object();
}

class NodeFramesE2E : public CliRun {
 protected:
  void SetUp() override {
    CliRun::SetUp();
    if (IsSkipped()) return;
    node_ = loupe::test::on_path("node");
    if (node_.empty()) GTEST_SKIP() << "node not on PATH";
  }
  std::string node_;
};

}  // namespace

// offcpu: waitForTheDatabase() blocks 20 ms at a time in Atomics.wait; its blocks are off
// the CPU under it, as long as the workload's clock says (less the call's own CPU time).
TEST_F(NodeFramesE2E, OffCpuTimeIsUnderTheJavaScriptFunctionThatWaited) {
  RunResult r = run("[[plugins]]\nname = \"offcpu\"\n", {node_, NODE_WORKLOAD, "sleep", "2"});
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const json own = said(r);
  ASSERT_TRUE(own.contains("waited_s")) << r.output;
  double under = 0, named = 0;
  for (const json* rec : r.all("stack", "offcpu")) {
    const auto js = js_frames(*rec);
    if (js.empty()) continue;
    named += static_cast<double>(value_of(*rec, "offcpu_ns"));
    if (js.front() == "waitForTheDatabase")
      under += static_cast<double>(value_of(*rec, "offcpu_ns"));
  }
  const double waited = own["waited_s"].get<double>() * 1e9;
  std::printf(
      "  off the CPU under waitForTheDatabase: %.1f ms of %.1f ms under any "
      "JavaScript; its own clock: %.1f ms\n",
      under / 1e6, named / 1e6, waited / 1e6);
  EXPECT_LE(under, waited * 1.001);
  EXPECT_GE(under, waited * 0.85);
}

// memalloc: allocateBuffers() makes buffers of 1 MiB, 8 every 50 ms; each is one allocation
// of 1 MiB under it, named although node had exited when memalloc named its sites. Room for
// 65536 stacks: node's own allocations (450k in 3 s, 7-9k distinct sites) fill the default
// 16384 (counted in memalloc/unwind_ids_full), after which new stacks have no frames.
TEST_F(NodeFramesE2E, AllocationsAreUnderTheJavaScriptFunctionThatMadeThem) {
  RunResult r = run("[[plugins]]\nname = \"memalloc\"\nmax_stacks = 65536\n",
                    {node_, NODE_WORKLOAD, "alloc", "3"});
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const json own = said(r);
  ASSERT_TRUE(own.contains("buffers")) << r.output;
  const std::int64_t each = own["bytes_each"].get<std::int64_t>();
  const std::int64_t made = own["buffers"].get<std::int64_t>();
  std::int64_t allocs = 0, elsewhere = 0;
  for (const json* rec : r.all("stack", "alloc_sites")) {
    const auto js = js_frames(*rec);
    const std::int64_t n = value_of(*rec, "allocs"), bytes = value_of(*rec, "alloc_bytes");
    if (n == 0 || bytes != n * each) continue;
    if (std::find(js.begin(), js.end(), "allocateBuffers") != js.end())
      allocs += n;
    else
      elsewhere += n;
  }
  std::printf(
      "  allocations of %lld bytes under allocateBuffers: %lld, elsewhere %lld; its "
      "own: %lld\n",
      (long long)each, (long long)allocs, (long long)elsewhere, (long long)made);
  // Those made before the session read node (its first tables: 0.3 s natively, seconds
  // under emulation) have their JIT frames by address: every one natively, most emulated.
  EXPECT_LE(allocs + elsewhere, made);
  // What the session said it could not do, for a run that falls short: whose frames were
  // unread (v8_frames), which stacks had no room (memalloc's rows).
  std::string said_health;
  for (const auto& rec : r.records)
    if (rec.value("kind", "") == "health" && rec.value("is_final", false) &&
        rec["health"].value("value", 0.0) > 0 && rec["health"].value("severity", "") != "ok")
      said_health += "\n  " + rec.value("name", "") + " " + rec["health"].dump();
  EXPECT_GE(allocs * 10, made * 8)
      << "fewer than 80 % of the buffers are under their function" << said_health;
}
