// SPDX-License-Identifier: Apache-2.0
//
// runtimes/hotspot read from live JVMs started without any flag (OpenJDK 17 and, where the
// machine has it, Temurin 25): the entry the walk reads, and the compiled methods found by
// walking the CodeCache as HotSpot does, named with the methods the JIT inlined into them
// and the source lines of Inlined.java, computed from the file, not written here.
#include <bpf/bpf.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>
#include <thread>

#include <gtest/gtest.h>

#include "hotspot/hotspot_frames.hpp"
#include "util/unique_fd.hpp"

extern char** environ;

namespace loupe {
namespace {

// The 1-based line of the first line of `path` holding `text`.
std::uint32_t line_of(const std::string& path, const std::string& text) {
  std::ifstream in(path);
  std::string line;
  for (std::uint32_t n = 1; std::getline(in, line); ++n)
    if (line.find(text) != std::string::npos) return n;
  return 0;
}

class HotSpotFramesTest : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    if (::geteuid() != 0) GTEST_SKIP() << "reading a JVM's memory and making a BPF map need root";
    java_ = GetParam() + "/bin/java";
    const std::string javac = GetParam() + "/bin/javac";
    if (!std::filesystem::exists(java_) || !std::filesystem::exists(javac))
      GTEST_SKIP() << GetParam() << " is not on this machine";
    classes_ = std::string(JAVA_CLASSES_DIR) + "/" + std::to_string(::getpid()) + "-" +
               std::filesystem::path(GetParam()).filename().string();
    std::filesystem::create_directories(classes_);
    const std::string cmd = javac + " -d " + classes_ + " " + JAVA_SOURCE;
    ASSERT_EQ(std::system(cmd.c_str()), 0) << cmd;
    std::vector<std::string> argv = {java_, "-cp", classes_, "Inlined", "30"};
    std::vector<char*> a;
    for (auto& s : argv) a.push_back(s.data());
    a.push_back(nullptr);
    ASSERT_EQ(::posix_spawn(&jvm_, a[0], nullptr, nullptr, a.data(), environ), 0);
    procs_ = UniqueFd(bpf_map_create(BPF_MAP_TYPE_HASH, "test_hs_procs", 4,
                                     sizeof(loupe_hotspot_proc), 16, nullptr));
    ASSERT_GE(procs_.get(), 0) << std::strerror(errno);
  }
  void TearDown() override {
    if (jvm_ > 0) {
      ::kill(jvm_, SIGKILL);
      ::waitpid(jvm_, nullptr, 0);
    }
    if (!classes_.empty()) std::filesystem::remove_all(classes_);
  }

  std::string java_, classes_;
  pid_t jvm_ = -1;
  UniqueFd procs_;
};

TEST_P(HotSpotFramesTest, ReadsTheJvmAndNamesTheMethodsInlinedIntoACompiledOne) {
  HotSpotFrames hs;
  ASSERT_TRUE(hs.attach({{"loupe_hotspot_procs", procs_.get()}}));
  const auto pid = static_cast<std::uint32_t>(jvm_);
  // The launcher maps libjvm in its first milliseconds (no: not a JVM yet), then the VM
  // makes its CodeCache and interpreter (later: asked again).
  Runtime::Update u = Runtime::Update::kNo;
  for (int i = 0; i < 200 && u != Runtime::Update::kYes; ++i) {
    std::vector<MapsEntry> maps;
    int err = 0;
    ASSERT_TRUE(read_process_maps("/proc", pid, &maps, &err)) << std::strerror(err);
    u = hs.update(pid, maps);
    if (u != Runtime::Update::kYes) std::this_thread::sleep_for(std::chrono::milliseconds(25));
  }
  ASSERT_EQ(u, Runtime::Update::kYes);
  loupe_hotspot_proc e{};
  ASSERT_TRUE(hs.entry(pid, &e));
  loupe_hotspot_proc in_map{};
  ASSERT_EQ(bpf_map_lookup_elem(procs_.get(), &pid, &in_map), 0);
  EXPECT_EQ(std::memcmp(&e, &in_map, sizeof(e)), 0) << "the walk reads another entry";
  EXPECT_LT(e.code_low, e.code_high);
  EXPECT_GE(e.n_heaps, 1u);
  EXPECT_LE(e.code_low, e.interp_low);
  EXPECT_LT(e.interp_low, e.interp_high);
  EXPECT_LE(e.interp_high, e.code_high);
  EXPECT_EQ(e.interp_bcp_slot, -8);

  // Inlined.outer compiled by C2 with mix inlined: wait for it (C2 within a few seconds).
  const std::string src = JAVA_SOURCE;
  const std::uint32_t mix_line = line_of(src, "x = x * 6364136223846793005L + i + k;");
  const std::uint32_t call_line = line_of(src, "x = mix(x, i) ^ (x >>> 7);");
  ASSERT_GT(mix_line, 0u);
  ASSERT_GT(call_line, 0u);
  bool found = false;
  std::size_t named = 0, nmethods = 0;
  std::string seen;
  for (int round = 0; round < 40 && !found; ++round) {
    std::this_thread::sleep_for(std::chrono::milliseconds(250));
    for (std::uint64_t blob : hs.nmethod_blobs(pid)) {
      const auto* nm = hs.read_nmethod(pid, blob, HotSpotFrames::kAnyCompileId);
      if (!nm || !nm->method) continue;
      ++nmethods;
      named += nm->method->name.find('.') != std::string::npos;
      if (nm->method->name != "Inlined.outer") continue;
      seen += " outer#" + std::to_string(nm->compile_id);
      // A freed or reused nmethod is refused by its compile id.
      EXPECT_EQ(hs.read_nmethod(pid, blob, nm->compile_id + 1), nullptr);
      for (const auto& [pc, scopes] : nm->pcs) {
        if (scopes.size() < 2) continue;
        // Innermost first: mix at its loop's line, inlined at outer's call line.
        if (scopes[0].method->name == "Inlined.mix" && scopes[1].method->name == "Inlined.outer") {
          EXPECT_EQ(scopes[0].method->file, "Inlined.java");
          EXPECT_EQ(scopes[0].method->line_at(scopes[0].bci) == mix_line ||
                        scopes[0].method->line_at(scopes[0].bci) == mix_line - 1,
                    true)
              << "mix's line " << scopes[0].method->line_at(scopes[0].bci) << ", expected "
              << mix_line;
          EXPECT_EQ(scopes[1].method->line_at(scopes[1].bci), call_line);
          found = true;
          break;
        }
      }
    }
  }
  std::printf("  %zu compiled methods read, %zu named; Inlined.outer:%s\n", nmethods, named,
              seen.c_str());
  EXPECT_TRUE(found) << "no compiled Inlined.outer with mix inlined in " << nmethods << " nmethods";
  EXPECT_GE(named * 10, nmethods * 9) << "compiled methods without a name";
}

INSTANTIATE_TEST_SUITE_P(Jdks, HotSpotFramesTest,
                         ::testing::Values("/usr/lib/jvm/java-17-openjdk-amd64",
                                           "/usr/lib/jvm/temurin-25-jdk-amd64"),
                         [](const auto& info) {
                           return std::string(info.index == 0 ? "OpenJdk17" : "Temurin25");
                         });

}  // namespace
}  // namespace loupe
