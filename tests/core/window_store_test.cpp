// SPDX-License-Identifier: Apache-2.0
//
// The windows of a rotating session on disk: published whole under their start time,
// described by window.json, pruned oldest first by count and by bytes, and what a crashed
// run left half written removed.
#include "session/window_store.hpp"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace loupe {
namespace {
namespace fs = std::filesystem;

constexpr std::uint64_t kSecond = 1000000000ULL;
constexpr std::uint64_t kStart = 1795000000ULL * kSecond;  // 2026-11-18

class WindowStoreTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::path(::testing::TempDir()) /
           ("loupe-windows-" + std::to_string(::getpid()) + "-" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }

  // One window of `bytes` bytes of sink output, published.
  fs::path window(WindowStore& store, int i, std::size_t bytes,
                  const std::vector<std::string>& missing = {}) {
    WindowEnd w = store.begin(kStart + i * 10 * kSecond, kStart + (i + 1) * 10 * kSecond);
    EXPECT_FALSE(w.dir.empty()) << store.counters().last_error;
    EXPECT_EQ(fs::path(w.dir).filename().string().front(), '.')
        << "a window being written is hidden";
    std::ofstream(fs::path(w.dir) / "cpu.pb.gz") << std::string(bytes, 'x');
    return store.publish(w, missing);
  }
  std::vector<std::string> listed() const {
    std::vector<std::string> names;
    for (const auto& e : fs::directory_iterator(dir_ / "windows"))
      names.push_back(e.path().filename().string());
    std::sort(names.begin(), names.end());
    return names;
  }

  fs::path dir_;
};

TEST_F(WindowStoreTest, AWindowIsPublishedUnderItsStartTimeWithItsSpan) {
  WindowStore store(dir_, 0, 0);
  fs::path p = window(store, 0, 100, {"folded"});
  EXPECT_EQ(p.filename(), WindowStore::name_of(kStart));
  EXPECT_EQ(WindowStore::name_of(kStart + 123456789), "20261118T110640.123Z");
  EXPECT_EQ(listed(), std::vector<std::string>{"20261118T110640.000Z"});
  std::ifstream in(p / "window.json");
  auto j = nlohmann::json::parse(in);
  EXPECT_EQ(j["start"], "2026-11-18T11:06:40.000Z");
  EXPECT_EQ(j["end"], "2026-11-18T11:06:50.000Z");
  EXPECT_EQ(j["start_ns"].get<std::uint64_t>(), kStart);
  EXPECT_EQ(j["missing"], nlohmann::json::array({"folded"}));
  EXPECT_EQ(store.counters().written, 1u);
  EXPECT_EQ(store.counters().incomplete, 1u);
}

TEST_F(WindowStoreTest, RetainKeepsTheNewestWindows) {
  WindowStore store(dir_, 3, 0);
  for (int i = 0; i < 7; ++i) window(store, i, 10);
  auto names = listed();
  ASSERT_EQ(names.size(), 3u);
  EXPECT_EQ(names.front(), WindowStore::name_of(kStart + 40 * kSecond));
  EXPECT_EQ(names.back(), WindowStore::name_of(kStart + 60 * kSecond));
  EXPECT_EQ(store.counters().written, 7u);
  EXPECT_EQ(store.counters().pruned, 4u);
  EXPECT_EQ(store.counters().kept, 3u);
}

TEST_F(WindowStoreTest, RetainBytesKeepsWhatFitsAndAlwaysTheNewest) {
  WindowStore store(dir_, 0, 2500);
  for (int i = 0; i < 5; ++i) window(store, i, 1000);
  EXPECT_EQ(listed().size(), 2u);  // each window is 1000 bytes and its window.json
  EXPECT_LE(store.counters().kept_bytes, 2500u);
  WindowStore tiny(dir_ / "tiny", 0, 10);
  window(tiny, 0, 1000);
  window(tiny, 1, 1000);
  EXPECT_EQ(tiny.counters().kept, 1u) << "a bound under one window still keeps the newest";
}

TEST_F(WindowStoreTest, AWindowLeftHalfWrittenByACrashIsRemovedAtTheStart) {
  fs::create_directories(dir_ / "windows" / ".partial-20261118T110640.000Z");
  fs::create_directories(dir_ / "windows" / "20261118T110630.000Z");
  WindowStore store(dir_, 0, 0);
  store.clean_partial();
  EXPECT_EQ(listed(), std::vector<std::string>{"20261118T110630.000Z"});
}

TEST_F(WindowStoreTest, AnUnwritableDirectoryIsCountedWithItsReason) {
  std::ofstream(dir_ / "file") << "x";
  WindowStore store(dir_ / "file", 0, 0);  // windows/ cannot be made under a file
  WindowEnd w = store.begin(kStart, kStart + kSecond);
  EXPECT_TRUE(w.dir.empty());
  EXPECT_TRUE(store.publish(w, {}).empty());
  EXPECT_EQ(store.counters().errors, 1u);
  EXPECT_NE(store.counters().last_error.find("cannot create"), std::string::npos)
      << store.counters().last_error;
}

}  // namespace
}  // namespace loupe
