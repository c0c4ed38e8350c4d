// SPDX-License-Identifier: Apache-2.0
//
// memalloc's default user stacks (unwind = "tables", the in-kernel unwinder) end to end
// through the CLI: tests/unwind/direct_alloc_lock.c calls malloc straight from alloc_site(),
// built with and without frame pointers. Every one of its allocations must be counted
// under exactly that direct caller (the first user frame outside libc), with the exact
// bytes, on a stack that goes on through alloc_phase to main; the kernel's frame-pointer
// walk (unwind = "fp") keeps the leaf but loses the rest on the build without frame
// pointers. Debian's own python3.11 and xz (no frame pointers) reach main by default.
#include <gtest/gtest.h>

#include <cstdio>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <regex>
#include <string>
#include <vector>

#include "cli_run.hpp"

namespace fs = std::filesystem;
using nlohmann::json;

namespace {

std::int64_t workload_figure(const std::string& output, const std::string& name) {
  std::smatch m;
  if (!std::regex_search(output, m, std::regex(name + "=([0-9]+)"))) return -1;
  return std::stoll(m[1]);
}

std::int64_t value(const json& rec, const std::string& name) {
  for (const auto& v : rec["stack"]["values"])
    if (v["name"] == name) return v["value"].get<std::int64_t>();
  return 0;
}

// The user frames' symbols, and the first one outside libc: the allocator's direct caller.
struct UserStack {
  std::string caller;
  std::vector<std::string> symbols;
  bool has(const std::string& s) const {
    for (const auto& x : symbols)
      if (x == s) return true;
    return false;
  }
  std::string joined() const {
    std::string j;
    for (const auto& s : symbols) j += s + ";";
    return j;
  }
};

UserStack user_stack(const json& rec) {
  UserStack u;
  for (const auto& f : rec["stack"]["frames"]) {
    if (f.value("kind", "") != "user") continue;
    const std::string sym = f["symbol"].is_string() ? f["symbol"].get<std::string>() : "?";
    const std::string mod = f["module"].is_string() ? f["module"].get<std::string>() : "";
    u.symbols.push_back(sym);
    if (u.caller.empty() && mod.find("libc.so") == std::string::npos) u.caller = sym;
  }
  return u;
}

struct Figures {
  std::int64_t want_allocs = 0, want_bytes = 0;  // the workload's own
  std::int64_t allocs = 0, bytes = 0;            // under exactly alloc_site
  std::int64_t rooted = 0;                       // ... whose stack goes on to alloc_phase, main
  std::string example;
};

class MemallocUnwind : public loupe::test::CliRun {
 protected:
  // `mode` empty: the plugin's defaults, as a profile without an unwind key gets them.
  Figures run_mode(const char* workload, const std::string& mode) {
    Figures f;
    const std::string body = "[[plugins]]\nname = \"memalloc\"\n" +
                             (mode.empty() ? std::string() : "unwind = \"" + mode + "\"\n");
    // 1.5 s asleep first: the session loads the process's tables once it runs.
    loupe::test::RunResult r = run(body, {workload, "1500"});
    EXPECT_EQ(r.exit_code, 0) << r.output;
    const std::string pid = std::to_string(workload_figure(r.output, "pid"));
    f.want_allocs = workload_figure(r.output, "alloc_site_allocs");
    f.want_bytes = workload_figure(r.output, "alloc_site_bytes");
    for (const json* rec : r.all("stack", "alloc_sites")) {
      if ((*rec)["labels"].value("pid", "") != pid) continue;
      const UserStack u = user_stack(*rec);
      if (u.caller != "alloc_site") {
        if (u.has("alloc_site") && f.example.empty()) f.example = "(caller lost) " + u.joined();
        continue;
      }
      const std::int64_t n = value(*rec, "allocs");
      f.allocs += n;
      f.bytes += value(*rec, "alloc_bytes");
      if (u.has("alloc_phase") && u.has("main")) f.rooted += n;
      else if (f.example.empty()) f.example = "(not rooted) " + u.joined();
    }
    std::printf(
        "  %s, unwind = %s: workload %lld allocations, %lld bytes; under alloc_site: %lld "
        "allocations (%lld through alloc_phase to main), %lld bytes\n    %s\n",
        fs::path(workload).filename().c_str(), mode.empty() ? "(default)" : mode.c_str(),
        static_cast<long long>(f.want_allocs), static_cast<long long>(f.want_bytes),
        static_cast<long long>(f.allocs), static_cast<long long>(f.rooted),
        static_cast<long long>(f.bytes), f.example.c_str());
    return f;
  }

  // memalloc counts every allocation: the site's figures are exact.
  void expect_exact(const Figures& f) {
    ASSERT_GT(f.want_allocs, 0);
    EXPECT_EQ(f.allocs, f.want_allocs) << f.example;
    EXPECT_EQ(f.bytes, f.want_bytes) << f.example;
    EXPECT_EQ(f.rooted, f.want_allocs) << f.example;
  }

  // The share of `program`'s allocations (by count and by bytes) whose user stack reaches
  // __libc_start_call_main, under the plugin's defaults.
  std::pair<double, double> rooted_share(const std::vector<std::string>& cmd) {
    loupe::test::RunResult r = run("[[plugins]]\nname = \"memalloc\"\n", cmd);
    EXPECT_EQ(r.exit_code, 0) << r.output;
    double all = 0, rooted = 0, all_bytes = 0, rooted_bytes = 0;
    std::string example;
    for (const json* rec : r.all("stack", "alloc_sites")) {
      const auto n = static_cast<double>(value(*rec, "allocs"));
      const auto b = static_cast<double>(value(*rec, "alloc_bytes"));
      const UserStack u = user_stack(*rec);
      all += n;
      all_bytes += b;
      if (u.has("__libc_start_call_main")) {
        rooted += n;
        rooted_bytes += b;
      } else if (example.empty()) {
        example = u.joined();
      }
    }
    double fp_only = -1;
    for (const json* m : r.all("metric", "unwind_fp_only_stacks"))
      fp_only = (*m)["metric"]["value"].get<double>();
    std::printf(
        "  %s: %.0f allocations, %.1f%% reach main (%.1f%% of bytes); %.0f stacks walked "
        "before the process had tables\n    not rooted, e.g.: %s\n",
        cmd[0].c_str(), all, all ? 100 * rooted / all : 0.0,
        all_bytes ? 100 * rooted_bytes / all_bytes : 0.0, fp_only, example.c_str());
    EXPECT_GT(all, 0) << r.output;
    return {all ? rooted / all : 0.0, all_bytes ? rooted_bytes / all_bytes : 0.0};
  }
};

TEST_F(MemallocUnwind, DefaultNamesTheDirectCallerExactlyWithoutFramePointers) {
  expect_exact(run_mode(UNWIND_ALLOC_LOCK_NOFP, ""));
}

TEST_F(MemallocUnwind, DefaultNamesTheDirectCallerExactlyWithFramePointers) {
  expect_exact(run_mode(UNWIND_ALLOC_LOCK_FP, ""));
}

// The overrides still work: dwarf gives the same exact site; fp keeps the leaf (the stack is
// taken at malloc's return, in alloc_site) but cannot go past a function without a frame
// pointer, so the build without them never reaches main.
TEST_F(MemallocUnwind, OverridesFpAndDwarf) {
  expect_exact(run_mode(UNWIND_ALLOC_LOCK_NOFP, "dwarf"));
  expect_exact(run_mode(UNWIND_ALLOC_LOCK_FP, "fp"));
  const Figures fp = run_mode(UNWIND_ALLOC_LOCK_NOFP, "fp");
  EXPECT_EQ(fp.allocs, fp.want_allocs);
  EXPECT_LT(fp.rooted, fp.want_allocs / 2) << fp.example;
}

// Debian's binaries, built without frame pointers, under the defaults.
TEST_F(MemallocUnwind, DebiansProgramsReachMainByDefault) {
  if (fs::exists("/usr/bin/python3.11")) {
    auto [count, bytes] =
        rooted_share({"/usr/bin/python3.11", "-c",
                      "'x = [bytearray(100000 + i) for i in range(200)]; print(len(x))'"});
    EXPECT_GE(count, 0.99);
    EXPECT_GE(bytes, 0.99);
  }
  if (fs::exists("/usr/bin/xz")) {
    auto [count, bytes] = rooted_share({"sh", "-c", "'head -c 4000000 /usr/bin/xz | xz -6 -T1 >/dev/null'"});
    EXPECT_GE(count, 0.99);
    EXPECT_GE(bytes, 0.99);
  }
}

}  // namespace
