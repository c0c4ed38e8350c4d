// SPDX-License-Identifier: Apache-2.0
#include "metrics_server.hpp"

#include <httplib.h>

#include <sys/socket.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <string_view>

#include "loupe/sdk/plugin.hpp"
#include "loupe/sdk/thread_name.hpp"

namespace loupe::sinks {

ListenAddress parse_listen(const std::string& text) {
  auto bad = [&](const std::string& why) {
    return sdk::Error(LOUPE_ERR_INVALID_ARG, "prometheus: listen = \"" + text + "\": " + why +
                                                 " (expected host:port, [v6]:port or :port)");
  };
  auto colon = text.rfind(':');
  if (colon == std::string::npos) throw bad("no port");
  ListenAddress a;
  a.host = text.substr(0, colon);
  if (a.host.size() >= 2 && a.host.front() == '[' && a.host.back() == ']')
    a.host = a.host.substr(1, a.host.size() - 2);
  if (a.host.empty()) a.host = "127.0.0.1";
  std::string port = text.substr(colon + 1);
  auto [end, ec] = std::from_chars(port.data(), port.data() + port.size(), a.port);
  if (port.empty() || ec != std::errc() || end != port.data() + port.size() || a.port < 0 ||
      a.port > 65535)
    throw bad("port must be a number in 0..65535");
  return a;
}

namespace {

std::string trim(std::string_view s) {
  auto b = s.find_first_not_of(" \t");
  if (b == std::string_view::npos) return {};
  auto e = s.find_last_not_of(" \t");
  std::string out(s.substr(b, e - b + 1));
  for (char& c : out)
    if (c >= 'A' && c <= 'Z') c = static_cast<char>(c - 'A' + 'a');
  return out;
}

}  // namespace

Exposition negotiate(const std::string& accept) {
  double protobuf_q = -1, text_q = -1;
  std::string_view rest = accept;
  while (!rest.empty()) {
    auto comma = rest.find(',');
    std::string_view range = rest.substr(0, comma);
    rest = comma == std::string_view::npos ? std::string_view() : rest.substr(comma + 1);
    auto semi = range.find(';');
    std::string type = trim(range.substr(0, semi));
    double q = 1;
    std::string proto, encoding;
    while (semi != std::string_view::npos) {
      range = range.substr(semi + 1);
      semi = range.find(';');
      std::string param = trim(range.substr(0, semi));
      auto eq = param.find('=');
      if (eq == std::string::npos) continue;
      std::string key = trim(param.substr(0, eq)), value = trim(param.substr(eq + 1));
      if (key == "q") {
        char* end = nullptr;
        q = std::strtod(value.c_str(), &end);
        if (end == value.c_str() || q < 0 || q > 1) q = 0;  // a bad weight accepts nothing
      } else if (key == "proto") {
        proto = value;
      } else if (key == "encoding") {
        encoding = value;
      }
    }
    if (type == "application/vnd.google.protobuf" && proto == "io.prometheus.client.metricfamily" &&
        encoding == "delimited")
      protobuf_q = std::max(protobuf_q, q);
    else if (type == "text/plain" || type == "text/*" || type == "*/*")
      text_q = std::max(text_q, q);
  }
  return protobuf_q > 0 && protobuf_q > text_q ? Exposition::kProtobuf : Exposition::kText;
}

MetricsServer::MetricsServer(const ListenAddress& addr, std::string token, Render render)
    : server_(std::make_unique<httplib::Server>()),
      token_(std::move(token)),
      render_(std::move(render)) {
  server_->Get("/metrics", [this](const httplib::Request& req, httplib::Response& res) {
    if (!authorized(req.get_header_value("Authorization"))) {
      ++unauthorized_;
      res.status = 401;
      res.set_header("WWW-Authenticate", "Bearer realm=\"loupe\"");
      res.set_content("401 unauthorized: this endpoint needs 'Authorization: Bearer <token>'\n",
                      "text/plain; charset=utf-8");
      return;
    }
    ++scrapes_;
    if (negotiate(req.get_header_value("Accept")) == Exposition::kProtobuf)
      res.set_content(render_(Exposition::kProtobuf), kProtobufType);
    else
      res.set_content(render_(Exposition::kText), kTextType);
  });
  server_->Get("/", [](const httplib::Request&, httplib::Response& res) {
    res.set_content("<html><body><a href=\"/metrics\">/metrics</a> (loupe)</body></html>\n",
                    "text/html; charset=utf-8");
  });
  // cpp-httplib's default sets SO_REUSEPORT, which lets a second loupe (or anything)
  // bind the same port and silently take half the scrapes. SO_REUSEADDR alone still
  // allows a restart while old connections sit in TIME_WAIT.
  server_->set_socket_options([](int sock) {
    int yes = 1;
    ::setsockopt(sock, SOL_SOCKET, SO_REUSEADDR, &yes, sizeof(yes));
  });
  errno = 0;
  if (addr.port == 0) {
    port_ = server_->bind_to_any_port(addr.host);
    if (port_ <= 0) port_ = 0;
  } else if (server_->bind_to_port(addr.host, addr.port)) {
    port_ = addr.port;
  }
  if (port_ == 0) {
    int err = errno;
    throw sdk::Error(LOUPE_ERR_RESOURCE,
                     "prometheus: cannot listen on " + addr.host + ":" + std::to_string(addr.port) +
                         (err ? std::string(": ") + std::strerror(err) : std::string()) +
                         " (port in use, or not a local address?)");
  }
  thread_ = std::thread([this] {
    sdk::name_this_thread("prometheus-http");
    server_->listen_after_bind();
    loop_exited_ = true;
  });
  // stop() is a no-op until the loop runs: without this wait, a sink destroyed right
  // after setup would join a thread that never ends.
  while (!server_->is_running() && !loop_exited_)
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
}

MetricsServer::~MetricsServer() {
  server_->stop();
  if (thread_.joinable()) thread_.join();
}

bool MetricsServer::authorized(const std::string& header) const {
  if (token_.empty()) return true;
  const std::string expected = "Bearer " + token_;
  // Compare every byte whatever the mismatch, so timing does not reveal the token.
  unsigned diff = header.size() == expected.size() ? 0u : 1u;
  for (std::size_t i = 0; i < expected.size(); ++i)
    diff |= static_cast<unsigned char>(expected[i]) ^
            static_cast<unsigned char>(i < header.size() ? header[i] : 0);
  return diff == 0;
}

}  // namespace loupe::sinks
