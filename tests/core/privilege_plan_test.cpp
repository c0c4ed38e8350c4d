// SPDX-License-Identifier: Apache-2.0
//
// What the session needs of the process's privileges (session/privilege_plan.hpp): the check
// before anything loads, the user to run as, the drop once attached. A drop changes the
// process for good, so each one runs in a child of the test, which says how it went by its
// exit status.
#include "session/privilege_plan.hpp"

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <functional>
#include <string>

#include "kernel/capabilities.hpp"
#include "kernel/privileges.hpp"
#include "loupe/exit_code.hpp"
#include "session/session_error.hpp"

namespace fs = std::filesystem;

namespace {

// `body` in a child process: its return value is the child's exit status, and any
// failure it prints goes to the test's output.
int in_child(const std::function<int()>& body) {
  const pid_t pid = ::fork();
  if (pid == 0) ::_exit(body());
  int status = 0;
  ::waitpid(pid, &status, 0);
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

bool has_bpf_privileges() {
  const auto caps = loupe::effective_capabilities();
  return caps.ok && (caps.has(loupe::kCapSysAdmin) ||
                     (caps.has(loupe::kCapBpf) && caps.has(loupe::kCapPerfmon)));
}

}  // namespace

TEST(PrivilegePlan, ASessionThatLoadsNoProgramNeedsNoCapability) {
  // Replaying a capture, or sinks alone: checked in a child that holds none.
  const int rc = in_child([] {
    if (!loupe::drop_privileges({}, std::nullopt)) return 2;
    return loupe::PrivilegePlan().check(/*loads_programs=*/false) ? 0 : 1;
  });
  EXPECT_EQ(rc, 0);
}

TEST(PrivilegePlan, WithoutCapabilitiesTheCheckNamesEveryOneMissing) {
  const int rc = in_child([] {
    if (!loupe::drop_privileges({}, std::nullopt)) return 2;
    const loupe::Status st = loupe::PrivilegePlan().check(true);
    if (st) return 3;
    if (loupe::exit_code_of(st) != loupe::ExitCode::kPrivilege) return 4;
    for (const char* want : {"CAP_BPF", "CAP_PERFMON", "CAP_SYS_ADMIN", "setcap"})
      if (st.error().find(want) == std::string::npos) {
        std::fprintf(stderr, "no %s in: %s\n", want, st.error().c_str());
        return 5;
      }
    return 0;
  });
  EXPECT_EQ(rc, 0);
}

TEST(PrivilegePlan, WithThemTheCheckPasses) {
  if (!has_bpf_privileges()) GTEST_SKIP() << "this test runs without CAP_BPF/CAP_SYS_ADMIN";
  EXPECT_TRUE(loupe::PrivilegePlan().check(true));
}

TEST(PrivilegePlan, AnUnknownUserIsAUsageErrorBeforeAnythingRuns) {
  loupe::PrivilegePlan plan;
  const loupe::Status st = plan.prepare_user("no-such-user-loupe-test", "/nonexistent");
  ASSERT_FALSE(st);
  EXPECT_EQ(loupe::exit_code_of(st), loupe::ExitCode::kUsage);
  EXPECT_NE(st.error().find("--user"), std::string::npos) << st.error();
  EXPECT_NE(st.error().find("no-such-user-loupe-test"), std::string::npos) << st.error();
  EXPECT_TRUE(plan.prepare_user("", "/nonexistent")) << "no user: nothing to prepare";
}

TEST(PrivilegePlan, TheOutputDirectoryBecomesTheUsersSoSinksCanWriteAfterTheSwitch) {
  auto nobody = loupe::lookup_user("nobody");
  if (!nobody) GTEST_SKIP() << "no user nobody here: " << nobody.error();
  const fs::path dir = fs::temp_directory_path() / ("loupe-plan-" + std::to_string(::getpid()));
  fs::create_directories(dir);
  loupe::PrivilegePlan plan;
  const loupe::Status st = plan.prepare_user("nobody", dir.string());
  struct stat s {};
  ASSERT_EQ(::stat(dir.c_str(), &s), 0);
  if (::geteuid() == 0) {
    EXPECT_TRUE(st) << st.error();
    EXPECT_EQ(s.st_uid, nobody.value().uid);
  } else {
    // Not ours to give: said with the directory, as a privilege error.
    ASSERT_FALSE(st);
    EXPECT_EQ(loupe::exit_code_of(st), loupe::ExitCode::kPrivilege);
    EXPECT_NE(st.error().find(dir.string()), std::string::npos) << st.error();
  }
  fs::remove_all(dir);
}

TEST(PrivilegePlan, NotAskedTheDropLeavesTheProcessAsItWas) {
  const auto before = loupe::effective_capabilities();
  ASSERT_TRUE(before.ok) << before.error;
  EXPECT_TRUE(loupe::PrivilegePlan().drop_after_attach(/*requested=*/false, false));
  EXPECT_EQ(loupe::effective_capabilities().mask, before.mask);
}

TEST(PrivilegePlan, AskedItKeepsOnlyWhatTheRestOfTheRunNeeds) {
  if (!has_bpf_privileges()) GTEST_SKIP() << "nothing to drop without CAP_BPF/CAP_SYS_ADMIN";
  const int rc = in_child([] {
    if (!loupe::PrivilegePlan().drop_after_attach(/*requested=*/true, /*signals_command=*/true))
      return 2;
    const auto caps = loupe::effective_capabilities();
    if (!caps.ok) return 3;
    // Loading programs is over: no CAP_SYS_ADMIN, and the check says so.
    if (caps.has(loupe::kCapSysAdmin)) return 4;
    if (loupe::PrivilegePlan().check(true)) return 5;
    // What is kept is what post_attach_capabilities says, and nothing else.
    std::uint64_t keep = 0;
    for (int c : loupe::post_attach_capabilities({.signal_command = true})) keep |= 1ULL << c;
    if ((caps.mask & ~keep) != 0) {
      std::fprintf(stderr, "kept more than asked: %#llx of %#llx\n",
                   static_cast<unsigned long long>(caps.mask),
                   static_cast<unsigned long long>(keep));
      return 6;
    }
    return 0;
  });
  EXPECT_EQ(rc, 0);
}
