// SPDX-License-Identifier: Apache-2.0
//
// Records with known values, one per kind, as the host would hand them to a sink
// (plugin, window and percentiles filled in), plus a scratch directory for outputs.
#ifndef LOUPE_TESTS_SINKS_SAMPLE_RECORDS_HPP
#define LOUPE_TESTS_SINKS_SAMPLE_RECORDS_HPP

#include <stdlib.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "loupe/sdk/records.hpp"

namespace loupe::test {

inline constexpr std::uint64_t kWindowStart = 1'700'000'000'000'000'000ull;
inline constexpr std::uint64_t kWindowEnd = kWindowStart + 5'000'000'000ull;

class TempDir {
 public:
  TempDir() {
    std::string tmpl = (std::filesystem::temp_directory_path() / "loupe-sinks-XXXXXX").string();
    if (!::mkdtemp(tmpl.data())) throw std::runtime_error("mkdtemp failed");
    path_ = tmpl;
  }
  ~TempDir() {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }
  const std::string& path() const { return path_; }
  std::string file(const std::string& name) const { return path_ + "/" + name; }

 private:
  std::string path_;
};

inline std::string read_file(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

inline std::vector<std::string> split_lines(const std::string& text) {
  std::vector<std::string> out;
  std::stringstream ss(text);
  for (std::string line; std::getline(ss, line);) out.push_back(line);
  return out;
}

// Owns a built record and the host-side extras (plugin name, window, percentiles).
class SampleRecord {
 public:
  SampleRecord(loupe_record_kind kind, std::string name) : b_(kind, std::move(name)) {}
  sdk::RecordBuilder& builder() { return b_; }
  SampleRecord& percentiles(std::vector<loupe_percentile> p) {
    pcts_ = std::move(p);
    return *this;
  }
  // The window the values cover (kWindowStart..kWindowEnd unless set).
  SampleRecord& window(std::uint64_t start_ns, std::uint64_t end_ns) {
    start_ = start_ns;
    end_ = end_ns;
    return *this;
  }
  const loupe_record& record(bool is_final = true, const char* plugin = "testplug") {
    rec_ = b_.final(is_final).window(start_, end_).build();
    rec_.plugin = plugin;
    if (rec_.histogram) {
      hist_ = *rec_.histogram;
      hist_.percentiles = pcts_.data();
      hist_.n_percentiles = static_cast<std::uint32_t>(pcts_.size());
      rec_.histogram = &hist_;
    }
    return rec_;
  }

 private:
  sdk::RecordBuilder b_;
  std::uint64_t start_ = kWindowStart, end_ = kWindowEnd;
  std::vector<loupe_percentile> pcts_;
  loupe_record rec_{};
  loupe_histogram hist_{};
};

// 100 values in [1024, 2048) ns, 50 in [2048, 4096) ns, one in [65536, 131072) ns.
inline SampleRecord latency_histogram() {
  SampleRecord r(LOUPE_RECORD_HISTOGRAM, "latency");
  r.builder()
      .label("comm", "dd")
      .histogram(LOUPE_BUCKETS_LOG2, 0, "ns",
                 {{1024, 2048, 100}, {2048, 4096, 50}, {65536, 131072, 1}}, 151, 300000, 1100,
                 70000);
  r.percentiles({{0.5, 1536, 1024, 2048},
                 {0.9, 3072, 2048, 4096},
                 {0.95, 3072, 2048, 4096},
                 {0.99, 3072, 2048, 4096},
                 {0.999, 70000, 65536, 131072}});
  return r;
}

inline SampleRecord health(loupe_health_severity sev, const char* name, const char* component,
                           std::uint64_t value, const char* message = "") {
  SampleRecord r(LOUPE_RECORD_HEALTH, name);
  r.builder().health(sev, component, value, message);
  return r;
}

// The same with its share and effect (ABI 1.11): `value` of `whole` `unit`.
inline SampleRecord health_of(loupe_health_severity sev, const char* name, const char* component,
                              std::uint64_t value, std::uint64_t whole, const char* unit,
                              loupe_health_effect effect) {
  SampleRecord r(LOUPE_RECORD_HEALTH, name);
  r.builder().health(sev, component, value).of(whole, unit, effect);
  return r;
}

}  // namespace loupe::test

#endif
