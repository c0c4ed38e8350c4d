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

class FileioE2E : public loupe::test::CliRun {};

TEST_F(FileioE2E, ExactCountsAndBytesPerPathAndOperation) {
  const std::string data = dir_ + "/data";
  std::filesystem::create_directories(data);
  {
    std::ofstream b(data + "/b.dat", std::ios::binary);
    std::string chunk(8192, 'b');
    for (int i = 0; i < 50; ++i) b << chunk;
  }
  RunResult r = run("[[plugins]]\nname = \"fileio\"\n", {FILEIO_WORKLOAD, data});
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
}

}  // namespace
