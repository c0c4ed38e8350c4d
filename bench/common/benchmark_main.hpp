// SPDX-License-Identifier: Apache-2.0
//
// For the Google Benchmark programs: BENCHMARK_MAIN's work, but the exit status says
// whether a benchmark failed (Google Benchmark 1.7 prints a SkipWithError and exits 0, so a
// broken one would pass ctest), and the smoke mode of ctest's `bench` label.
#ifndef LOUPE_BENCH_BENCHMARK_MAIN_HPP
#define LOUPE_BENCH_BENCHMARK_MAIN_HPP

#include <benchmark/benchmark.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <string>
#include <vector>

namespace loupe_bench {

// LOUPE_BENCH_SMOKE=1 (bench/CMakeLists.txt): each benchmark briefly, to show it still
// runs, not what it costs. Read where a benchmark is registered, for the counts and times
// that --benchmark_min_time does not override (Iterations, MinTime, a program's own).
inline bool smoke() {
  const char* e = std::getenv("LOUPE_BENCH_SMOKE");
  return e && *e && std::strcmp(e, "0") != 0;
}

template <typename Reporter>
class FailureCounting : public Reporter {
 public:
  using Reporter::Reporter;
  void ReportRuns(const std::vector<benchmark::BenchmarkReporter::Run>& runs) override {
    for (const auto& r : runs)
      if (r.error_occurred) ++failed_;
    Reporter::ReportRuns(runs);
  }
  int failed() const { return failed_; }

 private:
  int failed_ = 0;
};

// `before_run` may narrow the filter (benchmark::SetBenchmarkFilter) after the flags are
// read. 1 when any benchmark reported an error, 2 on an unknown flag.
inline int benchmark_main(int argc, char** argv, const std::function<void()>& before_run = {}) {
  std::string format = "console";
  for (int i = 1; i < argc; ++i)
    if (std::strncmp(argv[i], "--benchmark_format=", 19) == 0) format = argv[i] + 19;
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 2;
  if (before_run) before_run();
  int failed = 0;
  if (format == "json") {
    FailureCounting<benchmark::JSONReporter> r;
    benchmark::RunSpecifiedBenchmarks(&r);
    failed = r.failed();
  } else {
    FailureCounting<benchmark::ConsoleReporter> r(isatty(STDOUT_FILENO)
                                                      ? benchmark::ConsoleReporter::OO_Color
                                                      : benchmark::ConsoleReporter::OO_None);
    benchmark::RunSpecifiedBenchmarks(&r);
    failed = r.failed();
  }
  benchmark::Shutdown();
  if (failed) std::fprintf(stderr, "%d benchmark(s) reported an error\n", failed);
  return failed ? 1 : 0;
}

}  // namespace loupe_bench

#endif  // LOUPE_BENCH_BENCHMARK_MAIN_HPP
