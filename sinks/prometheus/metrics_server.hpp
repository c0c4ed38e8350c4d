// SPDX-License-Identifier: Apache-2.0
//
// The HTTP side: GET /metrics on one address, served from its own thread by cpp-httplib,
// optionally behind a bearer token, in the format the scraper's Accept header asks for.
#ifndef LOUPE_SINKS_PROMETHEUS_METRICS_SERVER_HPP
#define LOUPE_SINKS_PROMETHEUS_METRICS_SERVER_HPP

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <thread>

namespace httplib {
class Server;
}

namespace loupe::sinks {

struct ListenAddress {
  std::string host;  // "127.0.0.1", "::1", "0.0.0.0"
  int port = 0;      // 0 = any free port
};

// "host:port", "[v6]:port" or ":port" (= 127.0.0.1). Throws sdk::Error on bad input.
ListenAddress parse_listen(const std::string& text);

enum class Exposition { kText, kProtobuf };

inline constexpr const char* kTextType = "text/plain; version=0.0.4; charset=utf-8";
inline constexpr const char* kProtobufType =
    "application/vnd.google.protobuf; proto=io.prometheus.client.MetricFamily; "
    "encoding=delimited";

// The format an Accept header prefers: protobuf when it names delimited MetricFamily
// messages with a weight above every text type it accepts; text otherwise (no header, */*,
// a malformed one), the format every scraper reads.
Exposition negotiate(const std::string& accept);

class MetricsServer {
 public:
  using Render = std::function<std::string(Exposition)>;

  // Binds now (so a taken port fails the session's setup, not a thread later) and serves
  // from a thread until destruction. Throws sdk::Error when the address cannot be bound.
  MetricsServer(const ListenAddress& addr, std::string token, Render render);
  ~MetricsServer();
  MetricsServer(const MetricsServer&) = delete;
  MetricsServer& operator=(const MetricsServer&) = delete;

  int port() const { return port_; }
  std::uint64_t scrapes() const { return scrapes_.load(); }
  std::uint64_t unauthorized() const { return unauthorized_.load(); }

 private:
  bool authorized(const std::string& header) const;

  std::unique_ptr<httplib::Server> server_;
  std::string token_;
  Render render_;
  int port_ = 0;
  std::atomic<std::uint64_t> scrapes_{0};
  std::atomic<std::uint64_t> unauthorized_{0};
  std::atomic<bool> loop_exited_{false};
  std::thread thread_;
};

}  // namespace loupe::sinks

#endif  // LOUPE_SINKS_PROMETHEUS_METRICS_SERVER_HPP
