// SPDX-License-Identifier: Apache-2.0
//
// The session's target (session/target_scope.hpp) without plugins: a pid that names no
// process, a command held until released and its exit status, one stopped at the end, one
// that cannot be run. No process tree is asked for (follow = false), so no kernel.
#include "session/target_scope.hpp"

#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <fstream>
#include <thread>

#include "loupe/exit_code.hpp"
#include "loupe/features.hpp"
#include "session/session_error.hpp"

namespace {

using namespace std::chrono_literals;

// Nothing of the kernel is asked when no tree is followed.
struct NoFeatures : loupe::FeatureSet {
  loupe::FeatureResult get(const std::string& name) override {
    ADD_FAILURE() << "asked for " << name;
    return {};
  }
  std::vector<loupe::FeatureResult> all() override { return {}; }
};

loupe::SessionSpec command(std::vector<std::string> argv) {
  loupe::SessionSpec s;
  s.command = std::move(argv);
  s.follow = false;
  return s;
}

// Its exit status, once ended() says so (at most `within`).
std::optional<int> wait_ended(loupe::TargetScope& scope, std::chrono::milliseconds within) {
  std::optional<int> status;
  const auto deadline = std::chrono::steady_clock::now() + within;
  while (!scope.ended(&status) && std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(5ms);
  return status;
}

}  // namespace

TEST(TargetScope, APidThatNamesNoProcessIsATargetError) {
  // A child reaped at once: its pid names nothing now.
  const pid_t gone = ::fork();
  if (gone == 0) ::_exit(0);
  ::waitpid(gone, nullptr, 0);
  loupe::SessionSpec spec;
  spec.pid = gone;
  const loupe::Status st = loupe::TargetScope(spec).check_pid();
  ASSERT_FALSE(st);
  EXPECT_EQ(loupe::exit_code_of(st), loupe::ExitCode::kTarget);
  EXPECT_NE(st.error().find("no process has pid " + std::to_string(gone)), std::string::npos)
      << st.error();

  spec.pid = ::getpid();
  EXPECT_TRUE(loupe::TargetScope(spec).check_pid());
  spec.pid = 0;  // system-wide
  EXPECT_TRUE(loupe::TargetScope(spec).check_pid());
}

TEST(TargetScope, ACommandIsHeldUntilReleasedAndItsExitStatusEndsTheSession) {
  const std::string mark = testing::TempDir() + "/target_scope_mark_" + std::to_string(::getpid());
  ::unlink(mark.c_str());
  const auto spec = command({"sh", "-c", "touch " + mark + "; exit 7"});
  loupe::TargetScope scope(spec);
  NoFeatures features;
  ASSERT_TRUE(scope.start(features, nullptr));
  EXPECT_TRUE(scope.started_command());
  ASSERT_GT(scope.pid(), 0);
  EXPECT_EQ(scope.processes(), std::vector<pid_t>{scope.pid()});
  // Held before exec: nothing of the command ran yet.
  std::this_thread::sleep_for(50ms);
  EXPECT_FALSE(std::ifstream(mark).good()) << "the command ran before it was released";
  std::optional<int> status;
  EXPECT_FALSE(scope.ended(&status));

  ASSERT_TRUE(scope.release());
  status = wait_ended(scope, 10s);
  ASSERT_TRUE(status.has_value()) << "the command's exit was not seen";
  EXPECT_EQ(*status, 7);
  EXPECT_TRUE(std::ifstream(mark).good());
  ::unlink(mark.c_str());
}

TEST(TargetScope, ACommandStillRunningAtTheEndIsStopped) {
  const auto spec = command({"sleep", "30"});
  loupe::TargetScope scope(spec);
  NoFeatures features;
  ASSERT_TRUE(scope.start(features, nullptr));
  ASSERT_TRUE(scope.release());
  std::optional<int> status;
  EXPECT_FALSE(scope.ended(&status));
  const auto t0 = std::chrono::steady_clock::now();
  scope.end(2s);
  EXPECT_LT(std::chrono::steady_clock::now() - t0, 2s) << "SIGTERM alone ends sleep";
  ASSERT_TRUE(scope.ended(&status));
  EXPECT_EQ(*status, 128 + SIGTERM);
}

TEST(TargetScope, ACommandThatCannotRunIsATargetErrorWithItsName) {
  const auto spec = command({"/nonexistent/loupe-no-such-command"});
  loupe::TargetScope scope(spec);
  NoFeatures features;
  const loupe::Status started = scope.start(features, nullptr);
  // Forked and held: exec fails at the release, which says so.
  const loupe::Status st = started ? scope.release() : started;
  ASSERT_FALSE(st);
  EXPECT_EQ(loupe::exit_code_of(st), loupe::ExitCode::kTarget);
  EXPECT_NE(st.error().find("loupe-no-such-command"), std::string::npos) << st.error();
}
