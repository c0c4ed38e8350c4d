// SPDX-License-Identifier: Apache-2.0
//
// fileio end to end through the CLI on the real kernel: a workload with known file
// activity; loupe must count each path's operations and bytes exactly, and a file
// renamed in between must stay one file (one device:inode) named by its last name.
#include <gtest/gtest.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <string>
#include <tuple>

#include "cli_run.hpp"

using nlohmann::json;

namespace {

using loupe::test::RunResult;

class FileioE2E : public loupe::test::CliRun {
 protected:
  std::string make_data() {
    const std::string data = dir_ + "/data";
    std::filesystem::create_directories(data);
    std::ofstream b(data + "/b.dat", std::ios::binary);
    std::string chunk(8192, 'b');
    for (int i = 0; i < 50; ++i) b << chunk;
    std::ofstream(data + "/e.dat") << "e";
    return data;
  }
  // (path, op) -> (ops, bytes) of the final report.
  static std::map<std::pair<std::string, std::string>, std::pair<double, double>> per_file(
      const RunResult& r) {
    std::map<std::pair<std::string, std::string>, std::pair<double, double>> seen;
    for (const json* m : r.all("metric", "file_ops"))
      seen[{(*m)["labels"]["path"], (*m)["labels"]["op"]}].first = (*m)["metric"]["value"];
    for (const json* m : r.all("metric", "file_bytes"))
      seen[{(*m)["labels"]["path"], (*m)["labels"]["op"]}].second = (*m)["metric"]["value"];
    return seen;
  }
};

// Overflow contract (issue 27): max_files = 1 leaves room for one path and three (file, op)
// rows, and the workload works on four files with many operations each. Every timed call
// is in a row or counted in fileio/stats_full (WARN, naming max_files); the workload's
// own 100 writes, 10 fsyncs and 50 reads are among them, and files beyond the one path are
// counted in fileio/paths_full.
TEST_F(FileioE2E, TinyFileMapsCountEveryCallTheyCannotKeep) {
  const std::string data = make_data();
  RunResult r = run("[[plugins]]\nname = \"fileio\"\nmax_files = 1\n", {FILEIO_WORKLOAD, data});
  ASSERT_EQ(r.exit_code, 0) << r.output;
  double kept = 0;
  const auto rows = r.all("metric", "file_ops");
  for (const json* m : rows) kept += (*m)["metric"]["value"].get<double>();
  EXPECT_LE(rows.size(), 3u);
  const auto lost = static_cast<double>(r.expect_loss("fileio/stats_full", "max_files"));
  const auto timed = r.all("metric", "file_calls_timed");
  ASSERT_FALSE(timed.empty()) << r.output;
  std::printf("  calls: %.0f timed, %.0f kept, %.0f counted lost\n",
              (*timed.back())["metric"]["value"].get<double>(), kept, lost);
  EXPECT_EQ(kept + lost, (*timed.back())["metric"]["value"].get<double>())
      << "kept " << kept << ", lost " << lost;
  EXPECT_GE(kept + lost, 100 + 10 + 50);
  EXPECT_GT(lost, 0);
  EXPECT_GT(r.expect_loss("fileio/paths_full", "max_files"), 0u);
}

TEST_F(FileioE2E, ExactCountsAndBytesPerPathAndOperation) {
  const std::string data = make_data();
  // slow_us = 1: nearly every operation is also a slow event (checked against the counts).
  RunResult r = run("[[plugins]]\nname = \"fileio\"\nslow_us = 1\n", {FILEIO_WORKLOAD, data});
  ASSERT_EQ(r.exit_code, 0) << r.output;
  // (path, op) -> (ops, bytes); and the device:inode of each path.
  std::map<std::pair<std::string, std::string>, std::pair<double, double>> seen;
  std::map<std::string, std::set<std::string>> files;
  for (const json* m : r.all("metric", "file_ops")) {
    const auto& l = (*m)["labels"];
    seen[{l["path"], l["op"]}].first = (*m)["metric"]["value"];
    files[l["path"]].insert(l["file"].get<std::string>());
  }
  for (const json* m : r.all("metric", "file_bytes")) {
    const auto& l = (*m)["labels"];
    seen[{l["path"], l["op"]}].second = (*m)["metric"]["value"];
  }
  for (const auto& [k, v] : seen)
    if (k.first.rfind(data, 0) == 0)
      std::printf("  %s %s: %.0f ops, %.0f bytes\n", k.first.c_str(), k.second.c_str(), v.first,
                  v.second);
  const std::string a = data + "/a.dat", b = data + "/b.dat", d = data + "/d.tmp";
  auto at = [&](const std::string& path, const char* op) { return seen[std::make_pair(path, op)]; };
  auto pair = [](double ops, double bytes) { return std::make_pair(ops, bytes); };
  EXPECT_EQ(at(a, "open"), pair(1, 0));
  EXPECT_EQ(at(a, "write"), pair(100, 409600));
  EXPECT_EQ(at(a, "fsync").first, 10);
  EXPECT_EQ(at(a, "close").first, 1);
  EXPECT_EQ(at(b, "read"), pair(50, 409600));
  // stat-like calls: by path (stat, statx), by fd (glibc's fstat is newfstatat with
  // AT_EMPTY_PATH), and by a relative name of a file never opened.
  EXPECT_EQ(at(a, "stat").first, 7);
  EXPECT_EQ(at(b, "stat").first, 3);
  EXPECT_EQ(at("e.dat", "stat").first, 2) << "a file only stat'd is named as it was given";
  // Failures by errno: on the file, or on the operation when they name no file.
  std::map<std::tuple<std::string, std::string, std::string>, double> errnos;
  for (const json* m : r.all("metric", "file_errno")) {
    const auto& l = (*m)["labels"];
    errnos[{l["path"], l["op"], l["errno"]}] = (*m)["metric"]["value"];
  }
  EXPECT_EQ(at(b, "write"), pair(4, 0));
  EXPECT_EQ((errnos[{b, "write", "EBADF"}]), 4);
  std::map<std::pair<std::string, std::string>, double> failed;
  for (const json* m : r.all("metric", "file_failed"))
    failed[{(*m)["labels"]["op"], (*m)["labels"]["errno"]}] = (*m)["metric"]["value"];
  EXPECT_EQ((failed[{"open", "EISDIR"}]), 3);
  EXPECT_EQ((failed[{"stat", "ENOTDIR"}]), 2);
  // c.tmp renamed to d.tmp: one inode, named by its last open.
  EXPECT_EQ(at(d, "open").first, 2);
  EXPECT_EQ(at(d, "write"), pair(1, 1000));
  EXPECT_EQ(at(d, "read"), pair(1, 1000));
  EXPECT_EQ(files[d].size(), 1u);
  EXPECT_EQ(seen.count(std::make_pair(data + "/c.tmp", std::string("write"))), 0u)
      << "the renamed file split in two";
  bool latency = false;
  for (const json* h : r.all("histogram", "file_latency"))
    latency |= (*h)["labels"]["path"] == a && (*h)["labels"]["op"] == "fsync" &&
               (*h)["histogram"]["count"] == 10;
  EXPECT_TRUE(latency) << "fsync latency histogram of " << a;
  bool top = false;
  for (const json* m : r.all("metric", "file_total_bytes"))
    top |= (*m)["labels"]["path"] == a || (*m)["labels"]["path"] == b;
  EXPECT_TRUE(top);

  // fileslower's view (slow_us = 1): every write of a.dat at or above 1 µs is an event
  // with its position and sizes. A bucket whose lowest integer is at least 1000 ns lies
  // wholly above the threshold ((1024, 2048] = [1025, 2049) and up); (512, 1024] straddles
  // it: so the events are at least the sum of the former.
  std::uint64_t surely_slow = 0;
  for (const json* h : r.all("histogram", "file_latency"))
    if ((*h)["labels"]["path"] == a && (*h)["labels"]["op"] == "write")
      for (const auto& bk : (*h)["histogram"]["buckets"])
        if (bk["lower"].get<double>() >= 1000) surely_slow += bk["count"].get<std::uint64_t>();
  std::set<std::uint64_t> offsets;
  int writes = 0, with_stack = 0;
  for (const auto& rec : r.records) {
    if (rec.value("kind", "") != "event" || rec.value("name", "") != "file_slow") continue;
    const auto& f = rec["event"]["fields"];
    EXPECT_GE(f["latency_ns"].get<double>(), 1000);
    if (f["path"] != a || f["op"] != "write") continue;
    ++writes;
    EXPECT_EQ(f["requested"], 4096);
    EXPECT_EQ(f["bytes"], 4096);
    offsets.insert(f["offset"].get<std::uint64_t>());
    with_stack += !rec["event"].value("frames", json::array()).empty();
  }
  std::printf("  slow writes of a.dat: %d events, %llu surely slow, %zu offsets\n", writes,
              static_cast<unsigned long long>(surely_slow), offsets.size());
  EXPECT_GE(writes, static_cast<int>(surely_slow));
  EXPECT_LE(writes, 100);
  EXPECT_GT(writes, 0);
  EXPECT_EQ(offsets.size(), static_cast<std::size_t>(writes)) << "each write at its own offset";
  for (auto o : offsets) EXPECT_TRUE(o % 4096 == 0 && o < 409600) << o;
  EXPECT_EQ(with_stack, writes);
}

// hooks = "vfs": reads, writes and fsyncs from vfs_read / vfs_write / vfs_fsync_range,
// exact through fentry/fexit and through kprobe/kretprobe (fentry forced off) wherever the
// preflight says the kernel has them; refused with both reasons where it has neither.
TEST_F(FileioE2E, VfsHooksCountReadsWritesAndFsyncsExactly) {
  const std::string data = make_data();
  const std::string a = data + "/a.dat", b = data + "/b.dat";
  struct Way {
    const char* name;
    const char* entry;
    const char* exit;
    const char* disable;
  };
  int ran = 0;
  for (const Way& w : {Way{"fentry", "fentry", "fexit", ""},
                       Way{"kprobe", "kprobe", "kretprobe", "fentry,fexit"}}) {
    SCOPED_TRACE(w.name);
    if (!kernel_has(w.entry) || !kernel_has(w.exit)) continue;
    ::setenv("LOUPE_DISABLE_FEATURES", w.disable, 1);
    RunResult r = run("[[plugins]]\nname = \"fileio\"\nhooks = \"vfs\"\n", {FILEIO_WORKLOAD, data});
    ::unsetenv("LOUPE_DISABLE_FEATURES");
    ASSERT_EQ(r.exit_code, 0) << r.output;
    auto seen = per_file(r);
    auto at = [&](const std::string& path, const char* op) {
      return seen[std::make_pair(path, std::string(op))];
    };
    EXPECT_EQ(at(a, "write"), std::make_pair(100.0, 409600.0));
    EXPECT_EQ(at(a, "fsync").first, 10);
    EXPECT_EQ(at(b, "read"), std::make_pair(50.0, 409600.0));
    EXPECT_EQ(at(b, "write"), std::make_pair(4.0, 0.0)) << "vfs_write refuses a read-only file";
    EXPECT_EQ(at(a, "open").first, 0) << "vfs hooks see no opens";
    std::printf("  %s: a.dat write %.0f / %.0f bytes, fsync %.0f; b.dat read %.0f / %.0f\n", w.name,
                at(a, "write").first, at(a, "write").second, at(a, "fsync").first,
                at(b, "read").first, at(b, "read").second);
    ++ran;
  }
  if (ran == 0) {
    RunResult r = run("[[plugins]]\nname = \"fileio\"\nhooks = \"vfs\"\n", {"true"});
    EXPECT_NE(r.exit_code, 0);
    EXPECT_NE(r.output.find("hooks = \"vfs\" needs fentry/fexit"), std::string::npos) << r.output;
    std::printf("  neither fentry nor kprobes here: refused with the reasons\n");
  }
}

// The slow events' stacks of a program built without frame pointers into a libc built
// without them: with unwind = "dwarf" they reach main, as fileslower's never do.
TEST_F(FileioE2E, SlowEventStacksReachMainWithDwarf) {
  const std::string data = make_data();
  RunResult r = run("[[plugins]]\nname = \"fileio\"\nslow_us = 1\nunwind = \"dwarf\"\n",
                    {FILEIO_WORKLOAD, data});
  ASSERT_EQ(r.exit_code, 0) << r.output;
  int n = 0, rooted = 0;
  for (const auto& rec : r.records) {
    if (rec.value("kind", "") != "event" || rec.value("name", "") != "file_slow") continue;
    ++n;
    for (const auto& f : rec["event"].value("frames", json::array()))
      if (f.contains("symbol") && f["symbol"].is_string() && f["symbol"] == "main") {
        ++rooted;
        break;
      }
  }
  std::printf("  %d of %d slow events reach main\n", rooted, n);
  ASSERT_GT(n, 50);
  EXPECT_GE(rooted, n * 9 / 10);
}

}  // namespace
