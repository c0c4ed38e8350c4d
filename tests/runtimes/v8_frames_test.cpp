// SPDX-License-Identifier: Apache-2.0
//
// runtimes/v8 read from a live node started without any flag: the entry the walk reads,
// made from the binary's own metadata (v8dbg_*), held to what the binary's symbol table
// says independently (the interpreter's entry lies among the builtins the entry names).
// The names the entry leads to are the e2e test's (cpusample_node_e2e_test).
#include <bpf/bpf.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <string>
#include <thread>

#include <gtest/gtest.h>

#include "on_path.hpp"
#include "process_memory.hpp"
#include "symbols/process_maps.hpp"
#include "util/unique_fd.hpp"
#include "v8/v8_frames.hpp"

extern char** environ;

namespace loupe {
namespace {

class V8FramesTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (::geteuid() != 0) GTEST_SKIP() << "reading node's memory and making a BPF map need root";
    node_ = test::on_path("node");
    if (node_.empty()) GTEST_SKIP() << "node not on PATH";
    std::vector<std::string> argv = {node_, "-e", "setTimeout(() => {}, 30000)"};
    std::vector<char*> a;
    for (auto& s : argv) a.push_back(s.data());
    a.push_back(nullptr);
    ASSERT_EQ(::posix_spawn(&child_, a[0], nullptr, nullptr, a.data(), environ), 0);
    procs_ = UniqueFd(
        bpf_map_create(BPF_MAP_TYPE_HASH, "test_v8_procs", 4, sizeof(loupe_v8_proc), 16, nullptr));
    ASSERT_GE(procs_.get(), 0) << std::strerror(errno);
  }
  void TearDown() override {
    if (child_ > 0) {
      ::kill(child_, SIGKILL);
      ::waitpid(child_, nullptr, 0);
    }
  }

  std::string node_;
  pid_t child_ = -1;
  UniqueFd procs_;
};

TEST_F(V8FramesTest, ANodeStartedWithoutFlagsGetsTheEntryItsBinaryDescribes) {
  V8Frames v8;
  ASSERT_TRUE(v8.attach({{"loupe_v8_procs", procs_.get()}}));
  const auto pid = static_cast<std::uint32_t>(child_);
  Runtime::Update u = Runtime::Update::kNo;
  std::string binary;
  for (int i = 0; i < 100 && u != Runtime::Update::kYes; ++i) {
    std::vector<MapsEntry> maps;
    int err = 0;
    ASSERT_TRUE(read_process_maps("/proc", pid, &maps, &err)) << err;
    for (const auto& m : maps)
      if (m.executable && m.file_backed() && m.path.find("node") != std::string::npos)
        binary = m.path;
    u = v8.update(pid, maps);
    if (u != Runtime::Update::kYes) std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  ASSERT_EQ(u, Runtime::Update::kYes) << "node's V8 was not read";
  loupe_v8_proc e{};
  ASSERT_TRUE(v8.entry(pid, &e));
  loupe_v8_proc written{};
  ASSERT_EQ(bpf_map_lookup_elem(procs_.get(), &pid, &written), 0);
  EXPECT_EQ(std::memcmp(&e, &written, sizeof(e)), 0) << "the map holds another entry";
  std::printf(
      "  V8 %s in %s: fp function %d, context %d, bytecode offset %d; builtins "
      "[%#llx, %#llx)\n",
      v8.version(pid).c_str(), binary.c_str(), e.fp_function, e.fp_context, e.fp_bytecode_offset,
      (unsigned long long)e.blob_low, (unsigned long long)e.blob_high);
  // A frame's slots lie below its frame pointer, the function's below the context's.
  EXPECT_LT(e.fp_function, e.fp_context);
  EXPECT_LT(e.fp_context, 0);
  EXPECT_GT(e.type_jsfunction_last, e.type_jsfunction_first);
  // The interpreter's entry is one of the builtins: its symbol, where the binary keeps its
  // symbol table, lies in the range the entry gives.
  ASSERT_LT(e.blob_low, e.blob_high);
  const auto syms = elf_symbol_values(binary, {"Builtins_InterpreterEntryTrampoline"}, true);
  const auto it = syms.address.find("Builtins_InterpreterEntryTrampoline");
  if (it == syms.address.end()) GTEST_SKIP() << binary << " has no symbol table";
  if (syms.executable) {  // loaded at its link-time addresses
    EXPECT_GE(it->second, e.blob_low);
    EXPECT_LT(it->second, e.blob_high);
  }
  v8.forget(pid);
  EXPECT_NE(bpf_map_lookup_elem(procs_.get(), &pid, &written), 0) << "forget left the entry";
}

}  // namespace
}  // namespace loupe
