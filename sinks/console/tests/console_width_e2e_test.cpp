// SPDX-License-Identifier: Apache-2.0
//
// The console report of every bundled profile, unchanged, on a short command of Debian's
// binaries (issue 32: files.toml printed 66 rows despite `top = 20` and 66 histograms, the
// tables ran 290 to 450 columns wide, the wall profile's stacks 1,149): every line of the
// report fits 120 columns, every table stops at the console's `top` and says how many rows
// it left out, histograms are drawn for the busiest few and the rest counted, and a
// histogram whose producer does not measure its minimum does not claim `min 0 ns`. Root.
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <regex>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "cli_run.hpp"

namespace {

using nlohmann::json;

// Columns on screen (UTF-8 code points; the report is written without color to a pipe).
std::size_t columns(const std::string& line) {
  std::size_t n = 0;
  for (unsigned char c : line)
    if ((c & 0xC0) != 0x80) ++n;
  return n;
}

std::vector<std::string> lines_of(const std::string& text) {
  std::vector<std::string> out;
  std::istringstream in(text);
  for (std::string l; std::getline(in, l);) out.push_back(l);
  return out;
}

// gzip, cat and sync as the issue ran them: files opened, read, written and synced, CPU
// spent, blocks and wake-ups; the files are every Debian system's.
const char* kCommand =
    "sh -c 'for f in /etc/*.conf; do cat \"$f\"; done >/dev/null 2>&1; "
    "gzip -c /usr/lib/x86_64-linux-gnu/libc.so.6 >/dev/null; cat /etc/services >/dev/null; "
    "sync'";
// What python.toml is for: imports (dozens of modules) and collections.
const char* kPython =
    "python3 -c 'import json, decimal, email.parser, gc; [gc.collect() for _ in range(3)]'";

class ConsoleWidthE2E : public loupe::test::CliRun {
 protected:
  struct Run {
    int exit_code = -1;
    std::string output;               // loupe's and the command's stdout and stderr
    std::vector<std::string> report;  // from the report's title on
    std::vector<json> records;
  };
  // `loupe run PROFILE -- CMD` from the scratch directory, as a user runs a bundled
  // profile (its output_dir is ./loupe-out).
  Run run_profile(const std::string& name, const std::string& cmd) {
    std::filesystem::remove_all(dir_ + "/loupe-out");
    std::string line = "cd " + dir_ + " && " + loupe_ + " run " + LOUPE_PROFILES_DIR + "/" + name +
                       " -- " + cmd + " 2>&1";
    Run r;
    FILE* p = ::popen(line.c_str(), "r");
    char buf[4096];
    std::size_t n;
    while ((n = std::fread(buf, 1, sizeof(buf), p)) > 0) r.output.append(buf, n);
    const int status = ::pclose(p);
    r.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
    bool in_report = false;
    for (const auto& l : lines_of(r.output)) {
      in_report = in_report || l.find("loupe report") != std::string::npos;
      if (in_report) r.report.push_back(l);
    }
    std::ifstream in(dir_ + "/loupe-out/records.jsonl");
    for (std::string rec; std::getline(in, rec);)
      if (!rec.empty()) r.records.push_back(json::parse(rec, nullptr, false));
    return r;
  }
};

// Every bundled profile: what its report shows must fit 120 columns and one screen of 60
// lines (offcpu printed 89 and wall 92 before the console cut to its `lines`). A profile
// this kernel cannot run whole (a hook it lacks) still prints its report, which must fit.
// Profiles without a console sink print no report (agent.toml: a service's journal).
TEST_F(ConsoleWidthE2E, EveryBundledProfileFitsOneHundredTwentyColumnsAndSixtyLines) {
  std::vector<std::string> profiles;
  const std::regex console_sink(R"(^\s*name\s*=\s*"console")");
  for (const auto& e : std::filesystem::directory_iterator(LOUPE_PROFILES_DIR)) {
    if (e.path().extension() != ".toml") continue;
    std::ifstream in(e.path());
    bool console = false;
    for (std::string l; !console && std::getline(in, l);)
      console = std::regex_search(l, console_sink);
    if (console)
      profiles.push_back(e.path().filename());
    else
      std::cout << e.path().filename().string() << ": no console sink, no report\n";
  }
  std::sort(profiles.begin(), profiles.end());
  ASSERT_GE(profiles.size(), 10u);
  for (const auto& name : profiles) {
    Run r = run_profile(name, name == "python.toml" ? kPython : kCommand);
    ASSERT_FALSE(r.report.empty()) << name << " printed no report:\n" << r.output;
    std::size_t widest = 0;
    for (const auto& l : r.report) {
      widest = std::max(widest, columns(l));
      EXPECT_LE(columns(l), 120u) << name << ": " << l;
    }
    // The report starts at its title, after the blank line that opens it.
    EXPECT_LE(r.report.size() + 1, 60u) << name << ":\n" << r.output;
    std::cout << name << ": " << r.report.size() << " lines, widest " << widest << "\n";
  }
}

// files.toml on the same command: the file table lists the console's top (10) of its rows
// and counts the others, exactly those of the records not shown; the latency histograms
// are drawn for three files and the rest counted; fileio does not measure a minimum, so
// no histogram says `min 0 ns` (no file operation takes 0 ns: its lowest bucket says so).
TEST_F(ConsoleWidthE2E, TheFilesReportHonoursTopAndSaysWhatItLeftOut) {
  Run r = run_profile("files.toml", kCommand);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  std::set<std::string> files;  // rows of the file_ops table: path, file, op
  std::size_t histograms = 0;
  for (const auto& rec : r.records) {
    if (rec.is_discarded() || !rec.value("is_final", false)) continue;
    if (rec.value("kind", "") == "metric" && rec.value("name", "") == "file_ops")
      files.insert(rec["labels"].dump());
    if (rec.value("kind", "") == "histogram" && rec.value("name", "") == "file_latency" &&
        rec["histogram"].value("count", 0) > 0)
      ++histograms;
  }
  // /etc/*.conf alone is a dozen files on any Debian system, each opened, read, closed.
  ASSERT_GT(files.size(), 10u) << r.output;
  ASSERT_GT(histograms, 3u) << r.output;

  // The console's top (10) and three histograms drawn, unless the report had to be cut to
  // its 60 lines: then as the cut note says.
  struct {
    std::size_t top = 10, drawn = 3;
  } cut;
  for (const auto& l : r.report)
    if (auto at = l.find("(cut to 60 lines: "); at != std::string::npos) {
      cut.top = std::stoul(l.substr(at + 18));
      const std::size_t name = l.find(" rows a table, histograms drawn ") + 32;
      cut.drawn = std::min<std::size_t>(
          {3, std::stoul(l.substr(name)), std::stoul(l.substr(l.find(" a name and ") + 12))});
    }
  std::size_t header = r.report.size();
  for (std::size_t i = 0; i < r.report.size(); ++i)
    if (r.report[i].find("file_ops") != std::string::npos &&
        r.report[i].find("path") != std::string::npos) {
      header = i;
      break;
    }
  ASSERT_LT(header, r.report.size()) << r.output;
  std::size_t rows = 0;
  std::string more;
  for (std::size_t i = header + 1; i < r.report.size() && !r.report[i].empty(); ++i) {
    if (r.report[i].rfind("  … ", 0) == 0) {
      more = r.report[i];
      break;
    }
    if (r.report[i].find("all zero") == std::string::npos) ++rows;
  }
  EXPECT_EQ(rows, cut.top) << r.output;
  EXPECT_EQ(more.rfind("  … " + std::to_string(files.size() - cut.top) + " more row(s) with ", 0),
            0u)
      << "the rows left out: " << files.size() - cut.top << "\n"
      << r.output;

  std::size_t drawn = 0;
  std::string not_drawn;
  for (const auto& l : r.report) {
    if (l.rfind("  file_latency{", 0) == 0) ++drawn;
    if (l.find("more file_latency histogram(s) not drawn") != std::string::npos) not_drawn = l;
    EXPECT_EQ(l.find("min 0 ns"), std::string::npos) << l;
  }
  EXPECT_EQ(drawn, cut.drawn) << r.output;
  EXPECT_EQ(not_drawn.rfind("  … " + std::to_string(histograms - drawn) + " more file_latency", 0),
            0u)
      << r.output;
  EXPECT_NE(r.output.find("min >"), std::string::npos) << r.output;
}

}  // namespace
