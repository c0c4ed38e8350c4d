// SPDX-License-Identifier: Apache-2.0
//
// A minimal in-process host for the latency plugin's kernel tests: real BPF load and
// attach through libbpf, config from a C++ tree, records captured in memory, rings
// drained on demand. It lets the plugin be exercised before (and independently of) the
// core; the CLI end-to-end tests cover the real host.
#ifndef LOUPE_TESTS_LATENCY_FAKE_HOST_HPP
#define LOUPE_TESTS_LATENCY_FAKE_HOST_HPP

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <variant>
#include <vector>

#include "loupe/abi/plugin.h"

struct bpf_link;
struct ring_buffer;

// The ABI keeps loupe_config opaque: the test defines what it is.
struct loupe_config {
  using List = std::vector<loupe_config>;
  using Value = std::variant<bool, std::int64_t, double, std::string, List>;
  std::map<std::string, Value> values;
};

namespace loupe::test {

// `cfg` with every top-level key the plugin's schema gives a default and `cfg` lacks,
// as the real host fills them in (bool, integer, float and string literals).
loupe_config with_schema_defaults(const loupe_plugin_descriptor& d, const loupe_config& cfg);

struct CapturedRecord {
  std::uint32_t kind = 0;
  std::string name;
  std::map<std::string, std::string> labels;
  std::uint32_t is_final = 0;
  std::vector<loupe_bucket> buckets;
  std::uint64_t count = 0, sum = 0, min = 0, max = 0;
  double metric = 0;
  std::uint64_t health_value = 0;
  std::uint32_t severity = 0;
  std::string message;
  std::map<std::string, std::string> fields;  // event fields, rendered as text
  std::uint32_t n_frames = 0;
};

class FakeHost {
 public:
  FakeHost();
  ~FakeHost();

  const loupe_host_services* services() const { return &services_; }
  std::map<std::string, int> features;  // absent = available

  void detach_all();
  int drain_rings();  // records decoded
  std::vector<CapturedRecord> records;
  std::vector<std::string> probes;  // labels of adopted links

  // Finds the one record of `kind`, `name` whose labels include all of `labels`.
  const CapturedRecord* find(std::uint32_t kind, const std::string& name,
                             const std::map<std::string, std::string>& labels) const;

 private:
  static FakeHost* self(loupe_host* h) { return reinterpret_cast<FakeHost*>(h); }
  loupe_host_services services_{};
  std::vector<bpf_link*> links_;
  std::vector<loupe_ring_spec> rings_;
  ring_buffer* rb_ = nullptr;
  friend struct FakeHostShims;
};

}  // namespace loupe::test

#endif  // LOUPE_TESTS_LATENCY_FAKE_HOST_HPP
