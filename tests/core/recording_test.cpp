// SPDX-License-Identifier: Apache-2.0
//
// The session's capture file part (session/recording.hpp): what it says of a capture it
// cannot replay, before any plugin is set up. The capture format itself is
// dispatch/capture_file's (its tests), the record-and-replay path the CLI's.
#include "session/recording.hpp"

#include <gtest/gtest.h>
#include <unistd.h>

#include <fstream>

#include "loupe/exit_code.hpp"
#include "session/session_error.hpp"

TEST(Recording, NeitherRecordingNorReplayingIsNotReplaying) {
  EXPECT_FALSE(loupe::Recording("", "").replaying());
  EXPECT_FALSE(loupe::Recording("out.cap", "").replaying());
  EXPECT_TRUE(loupe::Recording("", "in.cap").replaying());
}

TEST(Recording, AMissingCaptureIsAUsageErrorNamingIt) {
  const std::string path = testing::TempDir() + "/no-such-capture-" + std::to_string(::getpid());
  loupe::Recording r("", path);
  const loupe::Status st = r.open_replay();
  ASSERT_FALSE(st);
  EXPECT_EQ(loupe::exit_code_of(st), loupe::ExitCode::kUsage);
  EXPECT_NE(st.error().find(path), std::string::npos) << st.error();
}

TEST(Recording, AFileThatIsNoCaptureIsAUsageErrorToo) {
  const std::string path = testing::TempDir() + "/not-a-capture-" + std::to_string(::getpid());
  std::ofstream(path) << "[[plugins]]\nname = \"cpusample\"\n";
  loupe::Recording r("", path);
  const loupe::Status st = r.open_replay();
  ASSERT_FALSE(st);
  EXPECT_EQ(loupe::exit_code_of(st), loupe::ExitCode::kUsage);
  EXPECT_FALSE(st.error().empty());
  ::unlink(path.c_str());
}
