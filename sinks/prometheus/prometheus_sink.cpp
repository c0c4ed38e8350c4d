// SPDX-License-Identifier: Apache-2.0
//
// prometheus sink: histograms, counters, gauges, events and loupe's health checks on an
// HTTP /metrics endpoint in Prometheus' text exposition format, or in its protobuf one with
// native histograms for scrapers that ask for it. Counters and histograms are cumulative
// for the life of the endpoint, gauges and health the latest value; with a session
// `interval` the values move while the session runs.
#include <chrono>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <thread>

#include "loupe/sdk/plugin.hpp"
#include "metric_store.hpp"
#include "metrics_server.hpp"

namespace loupe::sinks {
namespace {

constexpr loupe_config_key kKeys[] = {
    {"listen", LOUPE_CFG_STRING, 0, "\"127.0.0.1:9750\"",
     "address of the /metrics endpoint (host:port, [v6]:port; port 0 = any free port)", 0, 0,
     nullptr, 0, 0},
    {"token", LOUPE_CFG_STRING, 0, "\"\"",
     "when set, scrapes must send 'Authorization: Bearer <token>'", 0, 0, nullptr, 0, 0},
    {"prefix", LOUPE_CFG_STRING, 0, "\"loupe_\"", "prefix of every metric name", 0, 0, nullptr, 0,
     0},
    {"linger", LOUPE_CFG_INT, 0, "0",
     "seconds to keep serving after the session ends, so a scraper can read the final values", 0,
     3600, nullptr, 0, 0},
};

constexpr const char* kRunningHelp =
    "1 while the session runs; 0 once its final report is in (the values no longer move)";
constexpr const char* kReportsHelp =
    "reports received from the session (every interval, and the final one)";

class PrometheusSink : public sdk::Sink {
 public:
  void setup(const sdk::SetupArgs& args) override {
    host_.emplace(args.host);
    std::string prefix = args.config.value_string("prefix");
    if (!prefix.empty() && metric_name(prefix) != prefix)
      throw sdk::Error(LOUPE_ERR_INVALID_ARG, "prometheus: prefix \"" + prefix +
                                                  "\" is not a valid metric name prefix "
                                                  "([a-zA-Z_:][a-zA-Z0-9_:]*)");
    const std::uint64_t start_ns = args.session ? args.session->start_wall_ns : 0;
    store_ = std::make_unique<MetricStore>(prefix, start_ns);
    // What is known before any profiler reports: the first scrape is never empty.
    store_->set_own("up", "gauge", "1: loupe serves this endpoint", 1);
    if (start_ns)
      store_->set_own("session_start_time_seconds", "gauge",
                      "when the loupe session began, in seconds since the epoch",
                      static_cast<double>(start_ns) / 1e9);
    store_->set_own("session_running", "gauge", kRunningHelp, 1);
    store_->set_own("reports_total", "counter", kReportsHelp, 0);
    linger_s_ = args.config.value_int("linger");
    ListenAddress addr = parse_listen(args.config.value_string("listen"));
    std::string token = args.config.value_string("token");
    server_ = std::make_unique<MetricsServer>(addr, token, [this](Exposition format) {
      return format == Exposition::kProtobuf ? store_->render_protobuf() : store_->render();
    });
    // Port 0 picks a free port: this line is how a user (or a test) learns which.
    std::string shown =
        addr.host.find(':') != std::string::npos ? "[" + addr.host + "]" : addr.host;
    host_->info("prometheus: serving http://" + shown + ":" + std::to_string(server_->port()) +
                "/metrics" + (token.empty() ? "" : " (bearer token required)"));
  }

  void consume(const loupe_record& rec) override {
    std::string why;
    if (!store_->update(rec, &why) && !why.empty() && warned_.insert(why).second)
      host_->warn("prometheus: record '" + std::string(rec.name ? rec.name : "") +
                  "' skipped: " + why);
  }

  void flush(const sdk::FlushArgs& args) override {
    store_->set_own("reports_total", "counter", kReportsHelp, static_cast<double>(++reports_));
    if (args.is_final) store_->set_own("session_running", "gauge", kRunningHelp, 0);
  }

  ~PrometheusSink() override {
    if (server_ && linger_s_ > 0) std::this_thread::sleep_for(std::chrono::seconds(linger_s_));
  }

 private:
  std::optional<sdk::Host> host_;
  std::unique_ptr<MetricStore> store_;
  std::unique_ptr<MetricsServer> server_;  // after store_: stops before the store goes
  std::int64_t linger_s_ = 0;
  std::uint64_t reports_ = 0;
  std::set<std::string> warned_;
};

}  // namespace
}  // namespace loupe::sinks

LOUPE_SINK(loupe::sinks::PrometheusSink, "prometheus", "1.0.0",
           "Prometheus /metrics endpoint: histograms, counters, gauges and health",
           loupe::sinks::kKeys)
