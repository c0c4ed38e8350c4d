// SPDX-License-Identifier: Apache-2.0
//
// A real Prometheus server (Debian's `prometheus`) on a free loopback port, scraping one
// target (every second unless told) from a scratch directory, with its HTTP query API: the
// prometheus sink's tests, unit and kernel tier, check what it actually stored.
#ifndef LOUPE_TESTS_PROMETHEUS_SERVER_HPP
#define LOUPE_TESTS_PROMETHEUS_SERVER_HPP

#include <arpa/inet.h>
#include <httplib.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <fstream>
#include <iterator>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>
#include <vector>

namespace loupe::test {

inline int free_port() {
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a));
  socklen_t len = sizeof(a);
  ::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len);
  ::close(fd);
  return ntohs(a.sin_port);
}

class PrometheusServer {
 public:
  // `token`: the bearer credentials of the scrape ("" = none); `flags`: more arguments,
  // e.g. "--enable-feature=native-histograms"; `scrape_interval` in Prometheus' duration
  // syntax ("200ms").
  PrometheusServer(const std::string& dir, int target_port, const std::string& token = "",
                   const std::vector<std::string>& flags = {},
                   const std::string& scrape_interval = "1s")
      : port_(free_port()), dir_(dir) {
    std::ofstream cfg(dir + "/prometheus.yml");
    cfg << "global:\n  scrape_interval: " << scrape_interval << "\n  evaluation_interval: 1s\n"
        << "scrape_configs:\n  - job_name: loupe\n    scrape_interval: " << scrape_interval
        << "\n    scrape_timeout: " << scrape_interval << "\n";
    if (!token.empty()) cfg << "    authorization:\n      credentials: " << token << "\n";
    cfg << "    static_configs:\n      - targets: ['127.0.0.1:" << target_port << "']\n";
    cfg.close();
    std::vector<std::string> args{"prometheus", "--config.file=" + dir + "/prometheus.yml",
                                  "--storage.tsdb.path=" + dir + "/data",
                                  "--web.listen-address=127.0.0.1:" + std::to_string(port_),
                                  "--storage.tsdb.retention.time=1h"};
    args.insert(args.end(), flags.begin(), flags.end());
    pid_ = ::fork();
    if (pid_ == 0) {
      std::string log = dir + "/prometheus.log";
      std::freopen(log.c_str(), "w", stdout);
      std::freopen(log.c_str(), "a", stderr);
      std::vector<char*> argv;
      for (auto& a : args) argv.push_back(a.data());
      argv.push_back(nullptr);
      ::execvp("prometheus", argv.data());
      ::_exit(127);
    }
  }
  ~PrometheusServer() {
    if (pid_ <= 0) return;
    ::kill(pid_, SIGTERM);
    for (int i = 0; i < 100 && ::waitpid(pid_, nullptr, WNOHANG) == 0; ++i)
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    if (::waitpid(pid_, nullptr, WNOHANG) == 0) {
      ::kill(pid_, SIGKILL);
      ::waitpid(pid_, nullptr, 0);
    }
  }
  PrometheusServer(const PrometheusServer&) = delete;
  PrometheusServer& operator=(const PrometheusServer&) = delete;

  // The instant-query result vector at `at` (unix seconds; 0 = now), or null when the
  // server is not answering yet or refuses the query.
  nlohmann::json query(const std::string& promql, double at = 0) {
    httplib::Client c("127.0.0.1", port_);
    c.set_connection_timeout(2);
    c.set_read_timeout(5);
    httplib::Params p{{"query", promql}};
    if (at > 0) p.emplace("time", std::to_string(at));
    auto r = c.Get("/api/v1/query", p, httplib::Headers{});
    if (!r || r->status != 200) return nullptr;
    nlohmann::json j = nlohmann::json::parse(r->body, nullptr, false);
    if (j.is_discarded() || j.value("status", "") != "success") return nullptr;
    return j["data"]["result"];
  }
  // Polls until `pred` holds for the query's result or `timeout` passes.
  template <typename Pred>
  nlohmann::json wait_for(const std::string& promql, Pred pred, std::chrono::seconds timeout) {
    auto until = std::chrono::steady_clock::now() + timeout;
    nlohmann::json last;
    while (std::chrono::steady_clock::now() < until) {
      last = query(promql);
      if (!last.is_null() && pred(last)) return last;
      std::this_thread::sleep_for(std::chrono::milliseconds(250));
    }
    return last;
  }
  std::string log() const {
    std::ifstream in(dir_ + "/prometheus.log");
    return std::string(std::istreambuf_iterator<char>(in), {});
  }

 private:
  int port_;
  std::string dir_;
  pid_t pid_ = -1;
};

// The value of an instant query's first sample.
inline double value_of(const nlohmann::json& result) {
  return std::stod(result[0]["value"][1].get<std::string>());
}

}  // namespace loupe::test

#endif  // LOUPE_TESTS_PROMETHEUS_SERVER_HPP
