// SPDX-License-Identifier: Apache-2.0
//
// User stacks end to end on a distribution binary: Debian's own /usr/bin/xz and liblzma,
// built without frame pointers, compressing a file under `sh -c`. With the default
// in-kernel tables, and with dwarf unwinding, nearly every sample of xz must have a stack
// that reaches main (the frame
// __libc_start_call_main called, in the xz executable: xz is stripped, so main has no
// name, only its place) and liblzma's entry point lzma_code must appear. The same run with
// unwind = "fp" is measured and must do far worse: that is why dwarf exists.
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <random>
#include <string>
#include <vector>

#include "cli_run.hpp"
#include "user_frames.hpp"

using loupe::test::CliRun;
using loupe::test::RunResult;
using nlohmann::json;

namespace {

const std::string kXz = "/usr/bin/xz";

struct Attribution {
  std::int64_t xz = 0;                // samples of the xz process
  std::int64_t rooted = 0;            // ... whose user stack reaches main
  std::int64_t lzma_code = 0;         // ... with lzma_code on the stack
  std::int64_t eh_frame = 0;          // ... with a frame named by its FDE (stripped code)
  std::int64_t outside_main = 0;      // ... whole, but of a time main was not running
  std::vector<std::string> unrooted;  // the stacks that do not reach main, leaf first
  std::int64_t unrooted_samples() const { return xz - rooted - outside_main; }
};

// main's frame: the one __libc_start_call_main (libc6-dbg names it) or, without debug
// symbols, __libc_start_main called, lying in the executable.
bool reaches_main(const json& frames) {
  for (std::size_t i = 1; i < frames.size(); ++i) {
    const std::string caller = loupe::test::frame_str(frames[i], "symbol");
    if (caller != "__libc_start_call_main" && caller.rfind("__libc_start_main", 0) != 0) continue;
    const std::string module = loupe::test::frame_str(frames[i - 1], "module");
    if (module.size() >= 3 && module.compare(module.size() - 3, 3, "/xz") == 0) return true;
  }
  return false;
}

// "COUNT symbol@module;..." leaf first: a stack that missed main, as a failure prints it.
std::string described(std::int64_t n, const json& frames) {
  std::string line = std::to_string(n) + " ";
  for (const auto& f : frames)
    line += loupe::test::frame_str(f, "symbol") + "@" + loupe::test::frame_str(f, "module") + ";";
  return line;
}

Attribution attribute(const RunResult& r) {
  Attribution a;
  for (const auto* rec : r.all("stack", "cpu")) {
    if ((*rec)["labels"]["comm"] != "xz") continue;
    const std::int64_t n = (*rec)["stack"]["values"][0]["value"].get<std::int64_t>();
    const json& frames = (*rec)["stack"]["frames"];
    a.xz += n;
    if (reaches_main(frames)) {
      a.rooted += n;
    } else if (loupe::test::whole_outside_main(frames)) {
      a.outside_main += n;
    } else {
      a.unrooted.push_back(described(n, frames));
    }
    bool lzma = false, eh = false;
    for (const auto& f : frames) {
      lzma = lzma || loupe::test::frame_str(f, "symbol") == "lzma_code";
      eh = eh || loupe::test::frame_str(f, "resolution") == "eh_frame";
    }
    if (lzma) a.lzma_code += n;
    if (eh) a.eh_frame += n;
  }
  return a;
}

double health(const RunResult& r, const std::string& component) {
  for (const auto* rec : r.all("health", "stacks"))
    if ((*rec)["health"]["component"] == component) return (*rec)["health"]["value"].get<double>();
  return -1;
}

class CpuSampleDwarfE2E : public CliRun {
 protected:
  void SetUp() override {
    CliRun::SetUp();
    if (IsSkipped()) return;
    if (!std::filesystem::exists(kXz)) GTEST_SKIP() << kXz << " is not installed";
    // Text-like input xz works on for a few seconds at -6 (a word salad: random bytes would
    // send xz to its uncompressible fast path).
    data_ = dir_ + "/input.txt";
    std::ofstream out(data_);
    std::mt19937 rng(17);
    const char* words[] = {"loupe", "stack",  "frame",   "unwind",   "sample",  "kernel",
                           "user",  "dwarf",  "cfi",     "eh_frame", "lzma",    "xz",
                           "main",  "return", "address", "the",      "of",      "and",
                           "a",     "to",     "profile", "pointer",  "register"};
    std::string line;
    for (int i = 0; i < 400'000; ++i) {
      line += words[rng() % (sizeof(words) / sizeof(words[0]))];
      line += (rng() % 11 == 0) ? '\n' : ' ';
      if (line.size() > 4096) {
        out << line;
        line.clear();
      }
    }
    out << line;
  }

  RunResult run_xz(const std::string& unwind) {
    // `exec`: the session profiles the command's own pid (its children only once process
    // trees are followed). "" : the plugin's default.
    const std::string key = unwind.empty() ? "" : "unwind = \"" + unwind + "\"\n";
    return run("[[plugins]]\nname = \"cpusample\"\n" + key,
               {"sh", "-c", "'exec " + kXz + " -6 -T1 -c -k " + data_ + " > /dev/null'"});
  }

  std::string data_;
};

}  // namespace

TEST_F(CpuSampleDwarfE2E, XzStacksReachMainWithDwarfAndMostlyNotWithFramePointers) {
  RunResult dwarf = run_xz("dwarf");
  ASSERT_EQ(dwarf.exit_code, 0) << dwarf.output;
  Attribution d = attribute(dwarf);
  RunResult fp = run_xz("fp");
  ASSERT_EQ(fp.exit_code, 0) << fp.output;
  Attribution f = attribute(fp);
  std::printf(
      "  dwarf: xz samples=%lld reaching main=%lld (%.1f%%) with lzma_code=%lld "
      "with eh_frame names=%lld\n",
      (long long)d.xz, (long long)d.rooted, 100.0 * d.rooted / std::max<std::int64_t>(1, d.xz),
      (long long)d.lzma_code, (long long)d.eh_frame);
  std::printf("  fp:    xz samples=%lld reaching main=%lld (%.1f%%) with lzma_code=%lld\n",
              (long long)f.xz, (long long)f.rooted,
              100.0 * f.rooted / std::max<std::int64_t>(1, f.xz), (long long)f.lzma_code);
  std::printf(
      "  dwarf unwind: ok=%.0f no_cfi=%.0f exhausted=%.0f bad_memory=%.0f unmapped=%.0f "
      "copy_failed=%.0f\n",
      health(dwarf, "cpusample/unwind_ok"), health(dwarf, "cpusample/unwind_no_cfi"),
      health(dwarf, "cpusample/unwind_stack_exhausted"),
      health(dwarf, "cpusample/unwind_bad_memory"), health(dwarf, "cpusample/unwind_unmapped_pc"),
      health(dwarf, "cpusample/ustack_copy_failed"));
  ASSERT_GE(d.xz, 20) << "too few samples of xz to judge";
  // The samples that cannot reach main are those before it (the dynamic loader's start-up)
  // and after it returns (exit handlers): a few per run, well under 5%.
  EXPECT_GE(d.rooted * 100, d.xz * 95);
  EXPECT_GE(d.lzma_code * 100, d.xz * 90);  // the work is all under lzma_code
  EXPECT_GT(d.eh_frame, 0);                 // liblzma's static functions, named by FDE
  // Frame pointers: what this binary gives is measured above; it must be far from dwarf.
  ASSERT_GE(f.xz, 20);
  EXPECT_LT(f.rooted * 100, f.xz * 50) << "fp reached main in most xz samples";
  EXPECT_GE(d.rooted * f.xz, 2 * f.rooted * d.xz) << "dwarf is not clearly better than fp";
}

TEST_F(CpuSampleDwarfE2E, XzStacksReachMainWithTheDefaultInKernelTables) {
  // No unwind key: what profiles/cpu.toml gives.
  RunResult r = run_xz("");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  Attribution a = attribute(r);
  std::printf("  tables: xz samples=%lld reaching main=%lld (%.1f%%) with lzma_code=%lld\n",
              (long long)a.xz, (long long)a.rooted,
              100.0 * a.rooted / std::max<std::int64_t>(1, a.xz), (long long)a.lzma_code);
  ASSERT_GE(a.xz, 20) << "too few samples of xz to judge";
  // sh execs xz: xz's files are built at the next refresh (the command's own, sh's, were
  // built before it ran), in an emulated guest a good part of a second walked by frame
  // pointers, counted. A sample in code whose CFI the walk does not follow (the dynamic
  // linker's lazy-binding trampoline takes its CFA from rbx) or on a stack page not yet
  // resident stops that walk, counted: rare, never silent.
  const double fp_walked = health(r, "cpusample/unwind_fp_only_stacks");
  const double unsupported = health(r, "cpusample/unwind_unsupported");
  const double cut = loupe::test::counted_cut_stacks(r.records);
  std::printf("  stacks walked by frame pointers (counted): %.0f; every counted cut: %.0f\n",
              fp_walked, cut);
  EXPECT_GE(a.rooted * 100, a.xz * 90);
  // Every other stack that misses main was cut, and a cut is counted; printed so that a
  // failure shows which frame the walk stopped at.
  std::printf("  whole stacks of start-up or exit (no main to reach): %lld\n",
              (long long)a.outside_main);
  for (const auto& s : a.unrooted) std::printf("  not reaching main: %s\n", s.c_str());
  EXPECT_LE(static_cast<double>(a.unrooted_samples()), cut);
  EXPECT_GE(a.lzma_code * 100, a.xz * 90);
  EXPECT_LE(unsupported * 50, static_cast<double>(a.xz));
  EXPECT_EQ(health(r, "cpusample/unwind_bad_frame"), 0);
}

TEST_F(CpuSampleDwarfE2E, ASystemWideRunUnwindsProcessesItDidNotStart) {
  // xz runs before the session and is none of its doing: a system-wide session keeps
  // tables for every process of the machine, so xz's stacks reach main too. (Rows for a
  // whole machine: the rows map is sized so none is left out here; a full one is counted.)
  const pid_t xz = fork();
  ASSERT_GE(xz, 0);
  if (xz == 0) {
    execl("/bin/sh", "sh", "-c",
          ("exec " + kXz + " -9 -T1 -c -k " + data_ + " " + data_ + " " + data_ + " > /dev/null")
              .c_str(),
          static_cast<char*>(nullptr));
    _exit(127);
  }
  // A second of CPU time first: the session builds the tables of the processes that ran
  // most first, and an emulated guest's whole machine takes seconds.
  ::sleep(1);
  RunResult r =
      run("[[plugins]]\nname = \"cpusample\"\nfrequency = 199\ncomm = \"xz\"\n"
          "unwind_rows = 8388608\n",
          {}, "--duration 5");
  ::kill(xz, SIGKILL);
  ::waitpid(xz, nullptr, 0);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  Attribution a = attribute(r);
  std::printf(
      "  system-wide tables: xz samples=%lld reaching main=%lld (%.1f%%); rows full: %.0f\n",
      (long long)a.xz, (long long)a.rooted, 100.0 * a.rooted / std::max<std::int64_t>(1, a.xz),
      [&] {
        for (const auto* rec : r.all("health", "unwind_rows_full"))
          return (*rec)["health"]["value"].get<double>();
        return -1.0;
      }());
  ASSERT_GE(a.xz, 20) << "too few samples of xz to judge: " << r.output;
  // Its files are built within the first refreshes (a budget per tick, the whole machine's
  // binaries to build, the busiest processes first; seconds under emulation): the samples
  // before that are walked by frame pointers and counted with every other process's.
  // Counted, for every process: every way a walk can end short (a frame without rows,
  // an unsupported rule, a signal frame, an unreadable stack, ...) and every user stack
  // that failed.
  double counted = 0;
  for (const auto* rec : r.all("health", "stacks")) {
    const std::string c = (*rec)["health"]["component"];
    if (c.rfind("cpusample/unwind_", 0) == 0 || c.rfind("cpusample/user_stack_", 0) == 0)
      counted += (*rec)["health"]["value"].get<double>();
  }
  std::printf("  stacks cut or walked by frame pointers (every process, counted): %.0f\n", counted);
  for (const auto& s : a.unrooted) std::printf("  not reaching main: %s\n", s.c_str());
  EXPECT_GT(a.rooted, 0) << "no xz stack reached main: no tables for a process not started";
  // (A stack in a hundred may end short for a reason no counter names yet: seen once, 8
  // not rooted beside 7 counted; the shape of such a stack is what the numbers print.)
  EXPECT_LE(static_cast<double>(a.xz - a.rooted), counted + static_cast<double>(a.xz) / 100);
}

TEST_F(CpuSampleDwarfE2E, SamplesInTheVdsoUnwindThroughItToMain) {
  // clock_gettime() runs in the vdso, which no file backs: the unwinder reports this
  // process's own vdso image in its place (the same kernel maps the same image).
  RunResult r = run("[[plugins]]\nname = \"cpusample\"\nunwind = \"dwarf\"\n",
                    {CPU_SPIN_WORKLOAD, "1.5", "clock"});
  ASSERT_EQ(r.exit_code, 0) << r.output;
  std::int64_t total = 0, in_vdso = 0, rooted_vdso = 0, rooted = 0, outside_main = 0;
  std::vector<std::string> unrooted;
  for (const auto* rec : r.all("stack", "cpu")) {
    if ((*rec)["labels"]["comm"] != "cpu_spin") continue;
    const std::int64_t n = (*rec)["stack"]["values"][0]["value"].get<std::int64_t>();
    bool vdso = false, main_found = false;
    for (const auto& f : (*rec)["stack"]["frames"]) {
      vdso = vdso || loupe::test::frame_str(f, "module") == "[vdso]";
      main_found = main_found || loupe::test::frame_str(f, "symbol") == "main";
    }
    total += n;
    if (vdso) in_vdso += n;
    if (vdso && main_found) rooted_vdso += n;
    if (main_found) {
      rooted += n;
    } else if (loupe::test::whole_outside_main((*rec)["stack"]["frames"])) {
      outside_main += n;  // start-up or exit: whole, with no main to reach
    } else {
      unrooted.push_back(described(n, (*rec)["stack"]["frames"]));
    }
  }
  std::printf(
      "  clock loop: samples=%lld in the vdso=%lld of which reaching main=%lld; all "
      "reaching main=%lld\n",
      (long long)total, (long long)in_vdso, (long long)rooted_vdso, (long long)rooted);
  // What the user-space unwinder could not finish is counted by reason (no CFI, an unmapped
  // or unreadable frame, a copy too short, a failed copy).
  double counted = 0;
  for (const auto* rec : r.all("health", "stacks")) {
    const std::string c = (*rec)["health"]["component"];
    if ((c.rfind("cpusample/unwind_", 0) == 0 && c != "cpusample/unwind_ok") ||
        c == "cpusample/ustack_copy_failed")
      counted += (*rec)["health"]["value"].get<double>();
  }
  std::printf(
      "  stacks the unwinder could not finish (counted): %.0f; whole stacks of "
      "start-up or exit: %lld\n",
      counted, (long long)outside_main);
  for (const auto& u : unrooted) std::printf("  not reaching main: %s\n", u.c_str());
  ASSERT_GE(total, 10);
  EXPECT_GT(in_vdso, 0) << "no sample landed in the vdso: nothing was tested";
  EXPECT_GE(rooted_vdso * 100, in_vdso * 90);
  // Alone, 96-97 % of every sample reaches main in the emulated guests; beside other tests
  // 87-90 %: what does not is counted, bar one stack in a hundred.
  // (A 6.12 guest under two busy loops: 55 samples, 50 rooted, 4 counted: the fifth was
  // not told apart from a cut one before start-up and exit stacks were.)
  EXPECT_LE(static_cast<double>(total - rooted - outside_main),
            counted + static_cast<double>(total) / 100);
}
