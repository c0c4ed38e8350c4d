// SPDX-License-Identifier: Apache-2.0
//
// Core paths measured without a kernel: what the host pays per record (percentiles and the
// owned copy every record gets on publish), per report (per-CPU histogram merge), per run
// (profile parsing) and per line a jsonl sink writes.
#include <benchmark/benchmark.h>

#include <string>
#include <vector>

#include "../common/benchmark_main.hpp"
#include "dispatch/owned_record.hpp"
#include "loupe/sdk/histogram.hpp"
#include "plugins/profile.hpp"
#include "record_json.hpp"

namespace {

std::vector<loupe_bucket> log2_buckets(unsigned n) {
  std::vector<loupe_bucket> b;
  for (unsigned i = 0; i < n; ++i) b.push_back({1ull << i, 2ull << i, 1000ull + i * 37});
  return b;
}

void BM_ComputePercentiles(benchmark::State& state) {
  auto b = log2_buckets(static_cast<unsigned>(state.range(0)));
  for (auto _ : state) {
    auto p = loupe::compute_percentiles(b.data(), static_cast<std::uint32_t>(b.size()), 1,
                                        b.back().upper - 1);
    benchmark::DoNotOptimize(p.data());
  }
}
BENCHMARK(BM_ComputePercentiles)->Arg(8)->Arg(32)->Arg(63);

loupe_record histogram_record(const std::vector<loupe_bucket>& b, const loupe_histogram& h,
                              const loupe_label* l) {
  loupe_record r{};
  r.size = sizeof(r);
  r.kind = LOUPE_RECORD_HISTOGRAM;
  r.name = "latency";
  r.labels = l;
  r.n_labels = 2;
  r.histogram = &h;
  (void)b;
  return r;
}

// The copy the host makes of every published record (strings, buckets, percentiles).
void BM_OwnedRecordCopyHistogram(benchmark::State& state) {
  auto b = log2_buckets(static_cast<unsigned>(state.range(0)));
  loupe_histogram h{sizeof(h), LOUPE_BUCKETS_LOG2, 0,       static_cast<std::uint32_t>(b.size()),
                    "ns",      b.data(),           1000,    123456,
                    1,         b.back().upper - 1, nullptr, 0};
  loupe_label labels[] = {{"target", "read"}, {"mechanism", "tracepoint"}};
  loupe_record r = histogram_record(b, h, labels);
  for (auto _ : state) {
    loupe::OwnedRecord owned(r, "latency", 1, 2);
    benchmark::DoNotOptimize(&owned.view());
  }
}
BENCHMARK(BM_OwnedRecordCopyHistogram)->Arg(8)->Arg(32);

void BM_OwnedRecordCopyStack(benchmark::State& state) {
  std::vector<loupe_frame> frames(static_cast<std::size_t>(state.range(0)));
  for (std::size_t i = 0; i < frames.size(); ++i) {
    frames[i].address = 0x400000 + i * 16;
    frames[i].symbol = "some_function_name_of_typical_length";
    frames[i].module = "/usr/lib/x86_64-linux-gnu/libc.so.6";
  }
  loupe_value values[] = {{"samples", "count", 1}};
  loupe_stack_sample s{};
  s.size = sizeof(s);
  s.frames = frames.data();
  s.n_frames = static_cast<std::uint32_t>(frames.size());
  s.values = values;
  s.n_values = 1;
  loupe_record r{};
  r.size = sizeof(r);
  r.kind = LOUPE_RECORD_STACK_SAMPLE;
  r.name = "cpu";
  r.stack = &s;
  for (auto _ : state) {
    loupe::OwnedRecord owned(r, "cpusample", 1, 2);
    benchmark::DoNotOptimize(&owned.view());
  }
}
BENCHMARK(BM_OwnedRecordCopyStack)->Arg(8)->Arg(32)->Arg(127);

// The latency plugin's collect(): per-CPU histograms summed into one.
void BM_HistMergePerCpu(benchmark::State& state) {
  std::vector<loupe_hist> per_cpu(static_cast<std::size_t>(state.range(0)));
  for (std::size_t c = 0; c < per_cpu.size(); ++c) {
    per_cpu[c].count = 100;
    per_cpu[c].sum = 10000;
    per_cpu[c].min = 10 + c;
    per_cpu[c].max = 1000 + c;
    for (unsigned s = 0; s < LOUPE_HIST_LINEAR_SLOTS; ++s) per_cpu[c].slots[s] = (s * 7 + c) % 5;
  }
  for (auto _ : state) {
    auto m = loupe::sdk::hist_merge_per_cpu<loupe_hist>(per_cpu);
    auto buckets = loupe::sdk::hist_buckets(m, true);
    benchmark::DoNotOptimize(buckets.data());
  }
}
BENCHMARK(BM_HistMergePerCpu)->Arg(2)->Arg(16)->Arg(128);

// Profile validation before any plugin runs: TOML parse plus [session]/[[plugins]] checks.
void BM_ProfileParse(benchmark::State& state) {
  const std::string text = R"([session]
duration = 10.0
interval = 1.0
output_dir = "out"
[[plugins]]
name = "latency"
outlier_ns = 1000000
[[plugins.targets]]
syscall = "read"
[[plugins.targets]]
ufunc = "libc:malloc"
[[plugins]]
name = "syscount"
top = 20
[[sinks]]
name = "jsonl"
[[sinks]]
name = "console"
)";
  for (auto _ : state) {
    auto p = loupe::parse_profile_text(text, "<bench>");
    benchmark::DoNotOptimize(p.plugins.data());
  }
}
BENCHMARK(BM_ProfileParse);

// One record to one jsonl line (the jsonl sink's whole per-record work but the write).
void BM_JsonlEncodeHistogram(benchmark::State& state) {
  auto b = log2_buckets(24);
  loupe_histogram h{sizeof(h), LOUPE_BUCKETS_LOG2, 0,       static_cast<std::uint32_t>(b.size()),
                    "ns",      b.data(),           1000,    123456,
                    1,         b.back().upper - 1, nullptr, 0};
  loupe_label labels[] = {{"target", "read"}, {"mechanism", "tracepoint"}};
  loupe_record r = histogram_record(b, h, labels);
  loupe::OwnedRecord owned(r, "latency", 1, 2);  // with percentiles, as sinks receive it
  std::size_t bytes = 0;
  for (auto _ : state) {
    std::string line = loupe::sinks::record_to_line(owned.view());
    bytes += line.size();
    benchmark::DoNotOptimize(line.data());
  }
  state.SetBytesProcessed(static_cast<std::int64_t>(bytes));
}
BENCHMARK(BM_JsonlEncodeHistogram);

void BM_JsonlEncodeMetric(benchmark::State& state) {
  loupe_label labels[] = {{"syscall", "read"}, {"nr", "0"}};
  loupe_metric m{sizeof(m), LOUPE_METRIC_COUNTER, "calls", 12345};
  loupe_record r{};
  r.size = sizeof(r);
  r.kind = LOUPE_RECORD_METRIC;
  r.name = "syscalls";
  r.labels = labels;
  r.n_labels = 2;
  r.metric = &m;
  loupe::OwnedRecord owned(r, "syscount", 1, 2);
  for (auto _ : state) {
    std::string line = loupe::sinks::record_to_line(owned.view());
    benchmark::DoNotOptimize(line.data());
  }
}
BENCHMARK(BM_JsonlEncodeMetric);

}  // namespace

int main(int argc, char** argv) {
  return loupe_bench::benchmark_main(argc, argv);
}
