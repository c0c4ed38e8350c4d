// SPDX-License-Identifier: Apache-2.0
//
// The table of runtimes (runtimes/registry.cpp) and their profile keys
// (runtimes/runtime_keys.cpp, apart so that the profile's parser links no unwinder): one
// keys row for each runtime, in its order, and each runtime made with its own table.
#include <gtest/gtest.h>

#include "plugins/profile.hpp"
#include "plugins/runtime_keys.hpp"
#include "runtimes/runtime.hpp"

TEST(RuntimeTable, EveryRuntimeHasItsKeysRowInItsOrder) {
  const auto& keys = loupe::runtime_keys();
  const auto& rows = loupe::runtime_table();
  ASSERT_EQ(keys.size(), rows.size());
  for (std::size_t i = 0; i < rows.size(); ++i) EXPECT_STREQ(keys[i].name, rows[i].key);
}

TEST(RuntimeTable, EachRuntimeIsMadeFromTheProfilesTable) {
  const auto p = loupe::parse_profile_text("[runtimes.hotspot]\nperf_map = true\n", "p.toml");
  const auto made = loupe::make_runtimes("/proc", p.session.runtimes);
  ASSERT_EQ(made.size(), loupe::runtime_table().size());
  for (const auto& rt : made) EXPECT_NE(rt, nullptr);
  // Without the profile's tables (a session made in code): every runtime, at its defaults.
  EXPECT_EQ(loupe::make_runtimes("/proc", {}).size(), made.size());
}
