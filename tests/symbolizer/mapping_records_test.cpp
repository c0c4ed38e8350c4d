// SPDX-License-Identifier: Apache-2.0
//
// The kernel's mmap/exec/fork records (MappingEvents) let the symbolizer resolve a process
// it never saw alive: a grandchild of the profiled command, forked, exec'd and killed
// before the first lookup, when /proc/PID/maps, /proc/PID/root and map_files are gone.
#include <gtest/gtest.h>
#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <fstream>
#include <functional>
#include <memory>
#include <sstream>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "live_target.hpp"
#include "loupe/symbolizer.hpp"
#include "symbols/mapping_events.hpp"

namespace loupe {
namespace {

using test::LiveTarget;

std::string str(const char* s) {
  return s ? s : "";
}

loupe_frame user_frame(Symbolizer& sym, std::uint32_t pid, std::uint64_t addr) {
  loupe_frame f{};
  sym.symbolize(pid, LOUPE_FRAME_USER, &addr, 1, &f);
  return f;
}

// True once `pid` has no mappings left to read (reaped, or a zombie nobody reaped).
bool maps_gone(std::uint32_t pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/maps");
  std::string line;
  return !in || !std::getline(in, line);
}

void wait_maps_gone(std::uint32_t pid) {
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(5);
  while (!maps_gone(pid) && std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  ASSERT_TRUE(maps_gone(pid)) << "pid " << pid << " still has mappings";
}

struct Grandchild {
  std::uint32_t pid;
  std::uint64_t main_fn, lib_fn;
};

// `sh -c 'TARGET; true'`: the shell forks the target (the `; true` keeps it from exec'ing
// it in place), so the target is a descendant the records have to follow. `feed` gets the
// records asked for on the shell before it execs; `while_alive` runs once the target has
// printed its addresses; the target is killed before returning.
Grandchild run_grandchild(Symbolizer* feed, bool inherit = true,
                          const std::function<void(LiveTarget&)>& while_alive = {}) {
  std::string err;
  LiveTarget t({"sh", "-c", std::string(LOUPE_TARGET_SHLIB) + "; true"}, [&](pid_t pid) {
    if (!feed) return;
    auto ev = MappingEvents::open({pid}, inherit, 16);
    if (!ev) err = ev.error();
    if (ev) feed->follow_mappings(std::move(ev).value());
  });
  EXPECT_EQ(err, "");
  Grandchild r{static_cast<std::uint32_t>(t.addr("pid")), t.addr("loupe_known_function"),
               t.addr("loupe_lib_function")};
  EXPECT_NE(r.pid, 0u);
  if (while_alive) while_alive(t);
  t.kill();
  return r;
}

TEST(MappingRecords, ProcessNeverSeenAliveResolvesFromTheKernelsRecords) {
  auto sym = make_symbolizer();
  Grandchild r = run_grandchild(sym.get());
  wait_maps_gone(r.pid);
  // The first lookup comes after the process is gone: everything comes from the records
  // (and the files they name, found again by path and inode).
  loupe_frame f = user_frame(*sym, r.pid, r.main_fn + 1);
  EXPECT_EQ(str(f.symbol), "loupe_known_function") << "resolution " << f.resolution;
  EXPECT_EQ(f.offset, 1u);
  loupe_frame g = user_frame(*sym, r.pid, r.lib_fn);
  EXPECT_EQ(str(g.symbol), "loupe_lib_function") << "resolution " << g.resolution;
  EXPECT_NE(str(g.module).find("libloupe_known.so"), std::string::npos) << str(g.module);
  SymbolizerStats st = sym->stats();
  EXPECT_GT(st.mapping_records, 0u);
  EXPECT_EQ(st.mapping_records_lost, 0u);
  EXPECT_EQ(st.mapping_tasks, 1u);
}

TEST(MappingRecords, PumpedWhileAliveResolvesAfterExit) {
  // The session's way: records applied every turn of its loop while the process runs, so
  // the files are opened through the process's own root.
  auto sym = make_symbolizer();
  Grandchild r = run_grandchild(sym.get(), true, [&](LiveTarget&) { sym->pump(); });
  wait_maps_gone(r.pid);
  EXPECT_EQ(str(user_frame(*sym, r.pid, r.main_fn).symbol), "loupe_known_function");
}

TEST(MappingRecords, WithoutRecordsOrInheritanceTheSameProcessIsGone) {
  // The control: the same run without records leaves the frame unresolved, and records
  // of the shell alone (no inheritance: --no-follow) do not reach its child.
  {
    auto sym = make_symbolizer();
    Grandchild r = run_grandchild(nullptr);
    wait_maps_gone(r.pid);
    loupe_frame f = user_frame(*sym, r.pid, r.main_fn);
    EXPECT_EQ(f.symbol, nullptr);
    EXPECT_EQ(f.resolution, static_cast<std::uint32_t>(LOUPE_UNRESOLVED_PROCESS_GONE));
  }
  {
    auto sym = make_symbolizer();
    Grandchild r = run_grandchild(sym.get(), /*inherit=*/false);
    wait_maps_gone(r.pid);
    EXPECT_EQ(user_frame(*sym, r.pid, r.main_fn).symbol, nullptr);
  }
}

// The first executable file mapping of `pid`: start address and path.
std::pair<std::uint64_t, std::string> first_code(std::uint32_t pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/maps");
  std::string line;
  while (std::getline(in, line)) {
    std::istringstream f(line);
    std::string range, perms, off, dev, inode, path;
    f >> range >> perms >> off >> dev >> inode >> path;
    if (perms.size() > 2 && perms[2] == 'x' && !path.empty() && path[0] == '/')
      return {std::stoull(range, nullptr, 16), path};
  }
  return {0, ""};
}

TEST(MappingRecords, AnExecDropsTheImageTheForkCopied) {
  // The target starts as a fork of the shell, holding the shell's code, until its exec.
  // From the records alone, the shell's code must not be found in the target afterwards.
  auto sym = make_symbolizer();
  std::pair<std::uint64_t, std::string> shell_code;
  Grandchild r =
      run_grandchild(sym.get(), true, [&](LiveTarget& t) { shell_code = first_code(t.pid()); });
  ASSERT_NE(shell_code.first, 0u);
  wait_maps_gone(r.pid);
  loupe_frame in_shell = user_frame(*sym, r.pid, shell_code.first + 16);
  EXPECT_NE(str(in_shell.module), shell_code.second);
  EXPECT_EQ(str(user_frame(*sym, r.pid, r.main_fn).symbol), "loupe_known_function");
}

}  // namespace
}  // namespace loupe
