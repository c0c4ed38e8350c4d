// SPDX-License-Identifier: Apache-2.0
//
// debuginfod: a real `debuginfod` server on 127.0.0.1 serves the debug file of a stripped
// test binary; the symbolizer, which finds no .symtab and no /usr/lib/debug file, asks
// for it in the background and names the binary's static function once it arrived,
// while every lookup returns at once. A server that never answers is given up on at the
// bound. (Debian package `debuginfod`, installed by scripts/install-deps.sh.)
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <thread>

#include "live_target.hpp"
#include "loupe/symbolizer.hpp"

namespace loupe {
namespace {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

std::string str(const char* s) {
  return s ? s : "";
}

// A listening socket on 127.0.0.1 (port chosen by the kernel); never accepts.
int listen_loopback(int* port) {
  int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof(a);
  if (::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a)) != 0 || ::listen(fd, 16) != 0 ||
      ::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len) != 0)
    return -1;
  *port = ntohs(a.sin_port);
  return fd;
}

// The HTTP status of GET `path` on 127.0.0.1:port; 0 when nothing answers.
int http_status(int port, const std::string& path) {
  int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(static_cast<std::uint16_t>(port));
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  int status = 0;
  if (::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a)) == 0) {
    std::string req = "GET " + path + " HTTP/1.0\r\n\r\n";
    if (::write(fd, req.data(), req.size()) == static_cast<ssize_t>(req.size())) {
      char buf[64] = {};
      if (::read(fd, buf, sizeof(buf) - 1) > 12) status = std::atoi(buf + 9);
    }
  }
  ::close(fd);
  return status;
}

loupe_frame frame(Symbolizer& sym, std::uint32_t pid, std::uint64_t addr, double* ms) {
  loupe_frame f{};
  auto t0 = Clock::now();
  sym.symbolize(pid, LOUPE_FRAME_USER, &addr, 1, &f);
  *ms = std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
  return f;
}

class Debuginfod : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("loupe-debuginfod-" + std::to_string(::getpid()));
    fs::create_directories(dir_);
    ::setenv("DEBUGINFOD_CACHE_PATH", (dir_ / "cache").c_str(), 1);
  }
  void TearDown() override {
    if (server_ > 0) {
      ::kill(server_, SIGTERM);
      ::waitpid(server_, nullptr, 0);
    }
    fs::remove_all(dir_);
  }
  fs::path dir_;
  pid_t server_ = -1;
};

TEST_F(Debuginfod, StrippedBinarysStaticFunctionIsNamedFromTheServersDebugFile) {
  if (std::system("command -v debuginfod >/dev/null 2>&1") != 0)
    GTEST_SKIP() << "debuginfod is not installed (scripts/install-deps.sh installs it)";
  int port = 0;
  int probe = listen_loopback(&port);
  ASSERT_GE(probe, 0);
  ::close(probe);  // the port is free again for the server
  server_ = ::fork();
  if (server_ == 0) {
    std::string log = (dir_ / "server.log").string(), p = std::to_string(port),
                db = (dir_ / "db.sqlite").string();
    freopen(log.c_str(), "w", stdout);
    freopen(log.c_str(), "a", stderr);
    execlp("debuginfod", "debuginfod", "-F", "-p", p.c_str(), "-d", db.c_str(), DEBUGINFOD_SERVED,
           (char*)nullptr);
    _exit(127);
  }
  // Indexed once it serves the file.
  const std::string url_path = "/buildid/" + std::string(DEBUGINFOD_BUILD_ID) + "/debuginfo";
  auto deadline = Clock::now() + std::chrono::seconds(30);
  while (http_status(port, url_path) != 200 && Clock::now() < deadline)
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  ASSERT_EQ(http_status(port, url_path), 200) << "debuginfod never served " << url_path;

  test::LiveTarget t(DEBUGINFOD_STRIPPED);
  const std::uint64_t fn = t.addr("loupe_static_function");
  SymbolizerOptions o;
  o.debuginfod_urls = "http://127.0.0.1:" + std::to_string(port);
  auto sym = make_symbolizer(o);
  double ms = 0;
  loupe_frame f = frame(*sym, t.pid(), fn, &ms);
  // Before the file arrives: no symbol table names it (stripped, and static: not in
  // .dynsym), and the lookup did not wait for the network.
  EXPECT_NE(str(f.symbol), "loupe_static_function");
  EXPECT_LT(ms, 1000.0);
  deadline = Clock::now() + std::chrono::seconds(20);
  double worst = ms;
  while (str(f.symbol) != "loupe_static_function" && Clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    f = frame(*sym, t.pid(), fn, &ms);
    worst = std::max(worst, ms);
  }
  EXPECT_EQ(str(f.symbol), "loupe_static_function");
  EXPECT_EQ(f.resolution, static_cast<std::uint32_t>(LOUPE_RESOLVED_SYMTAB));
  SymbolizerStats st = sym->stats();
  EXPECT_EQ(st.debuginfod_requested, 1u);
  EXPECT_EQ(st.debuginfod_fetched, 1u);
  std::printf("  named after the fetch; slowest lookup meanwhile %.1f ms\n", worst);
}

TEST_F(Debuginfod, AServerThatNeverAnswersIsGivenUpAtTheBound) {
  int port = 0;
  int silent = listen_loopback(&port);  // connections queue, nobody answers
  ASSERT_GE(silent, 0);
  test::LiveTarget t(DEBUGINFOD_STRIPPED);
  SymbolizerOptions o;
  o.debuginfod_urls = "http://127.0.0.1:" + std::to_string(port);
  o.debuginfod_timeout_ms = 500;
  auto sym = make_symbolizer(o);
  double ms = 0;
  frame(*sym, t.pid(), t.addr("loupe_static_function"), &ms);
  EXPECT_LT(ms, 1000.0);
  auto deadline = Clock::now() + std::chrono::seconds(10);
  while (sym->stats().debuginfod_timed_out == 0 && Clock::now() < deadline)
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  SymbolizerStats st = sym->stats();
  EXPECT_EQ(st.debuginfod_timed_out, 1u)
      << "requested " << st.debuginfod_requested << " failed " << st.debuginfod_failed
      << " not_found " << st.debuginfod_not_found;
  EXPECT_EQ(st.debuginfod_fetched, 0u);
  ::close(silent);
}

}  // namespace
}  // namespace loupe
