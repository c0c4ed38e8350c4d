#include <gtest/gtest.h>

#include "loupe/plugin_registry.hpp"

TEST(Registry, ResolvesByNameFromSearchDirs) {
  loupe::PluginRegistry reg({TEST_PLUGIN_DIR});
  auto lib = reg.resolve("testprof");
  ASSERT_TRUE(lib);
  EXPECT_EQ(lib->name(), "testprof");
  EXPECT_EQ(lib->descriptor().kind, LOUPE_KIND_PROFILER);
  EXPECT_EQ(reg.resolve("testprof"), lib);  // cached, not reloaded
}

TEST(Registry, MissingPluginSaysWhereItLooked) {
  loupe::PluginRegistry reg({TEST_PLUGIN_DIR});
  try {
    reg.resolve("nosuchplugin");
    FAIL();
  } catch (const loupe::PluginLoadError& e) {
    std::string m = e.what();
    EXPECT_NE(m.find("plugin 'nosuchplugin' not found"), std::string::npos) << m;
    EXPECT_NE(m.find(TEST_PLUGIN_DIR), std::string::npos) << m;
  }
}

TEST(Registry, DuplicateNamesRefused) {
  loupe::PluginRegistry reg(std::vector<std::filesystem::path>{});
  auto a = loupe::PluginLibrary::open(std::string(TEST_PLUGIN_DIR) + "/loupe-testprof.so");
  reg.add(a);
  auto b = loupe::PluginLibrary::from_descriptor(&a->descriptor(), "builtin:other");
  try {
    reg.add(b);
    FAIL();
  } catch (const loupe::PluginLoadError& e) {
    EXPECT_NE(std::string(e.what()).find("already provided by"), std::string::npos) << e.what();
  }
}

TEST(Registry, ScanRecordsRejectionsWithReasons) {
  loupe::PluginRegistry reg({BAD_PLUGIN_DIR, TEST_PLUGIN_DIR});
  reg.scan_all();
  EXPECT_EQ(reg.loaded().size(), 1u);
  ASSERT_EQ(reg.rejections().size(), 5u);
  for (auto& r : reg.rejections()) EXPECT_NE(r.reason.find(r.path), std::string::npos) << r.reason;
}
