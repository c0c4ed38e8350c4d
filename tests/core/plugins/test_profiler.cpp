// A minimal profiler used by the core tests: no BPF, declares one key of each kind and
// emits what its config says, so schema validation and the lifecycle can be observed.
#include "loupe/sdk.hpp"

namespace {

constexpr loupe_config_key kTargetFields[] = {
    {"name", LOUPE_CFG_STRING, LOUPE_CFG_REQUIRED, nullptr, "target name"},
    {"weight", LOUPE_CFG_INT, 0, "1", "relative weight", 1, 100},
};

constexpr loupe_config_key kKeys[] = {
    {"count", LOUPE_CFG_INT, 0, "3", "records to emit per collect", 1, 10},
    {"mode", LOUPE_CFG_STRING, 0, "\"fast\"", "a string"},
    {"verbose", LOUPE_CFG_BOOL, 0, "false", "a bool"},
    {"ratio", LOUPE_CFG_FLOAT, 0, "0.5", "a float"},
    {"tags", LOUPE_CFG_STRING_LIST, 0, "[]", "a string list"},
    {"fail_in", LOUPE_CFG_STRING, 0, "\"\"", "hook that throws: setup|start|collect"},
    {"targets", LOUPE_CFG_TABLE_LIST, 0, nullptr, "target tables", 0, 0, kTargetFields, 2},
};

class TestProfiler : public loupe::sdk::Profiler {
 public:
  void setup(const loupe::sdk::SetupArgs& a) override {
    host_.emplace(a.host);
    count_ = a.config.get_int("count", 0);
    mode_ = a.config.get_string("mode", "");
    fail_in_ = a.config.get_string("fail_in", "");
    targets_ = a.config.get_tables("targets").size();
    if (fail_in_ == "setup")
      throw loupe::sdk::Error(LOUPE_ERR_INVALID_ARG, "asked to fail in setup");
  }
  void start(const loupe::sdk::StartArgs&) override {
    if (fail_in_ == "start") throw std::runtime_error("asked to fail in start");
  }
  void collect(const loupe::sdk::CollectArgs& a) override {
    if (fail_in_ == "collect") throw std::runtime_error("asked to fail in collect");
    for (std::int64_t i = 0; i < count_; ++i) {
      loupe::sdk::RecordBuilder r(LOUPE_RECORD_METRIC, "test_metric");
      r.label("mode", mode_).label("i", std::to_string(i)).final(a.is_final);
      r.metric(LOUPE_METRIC_COUNTER, "count", static_cast<double>(targets_ * 100 + i));
      r.emit(*host_);
    }
  }

 private:
  std::optional<loupe::sdk::Host> host_;
  std::int64_t count_ = 0;
  std::string mode_, fail_in_;
  std::size_t targets_ = 0;
};

}  // namespace

LOUPE_PROFILER(TestProfiler, "testprof", "0.1.0", "core test profiler (no BPF)", kKeys)
