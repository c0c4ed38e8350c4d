// Verification check 2: profiles fail with file:line:col before any plugin code runs.
#include <gtest/gtest.h>

#include "loupe/plugin_library.hpp"
#include "plugins/profile.hpp"

namespace {

std::shared_ptr<loupe::PluginLibrary> testprof() {
  static auto lib = loupe::PluginLibrary::open(std::string(TEST_PLUGIN_DIR) + "/loupe-testprof.so");
  return lib;
}

std::string error_of(const std::string& text) {
  try {
    auto p = loupe::parse_profile_text(text, "p.toml");
    for (auto& spec : p.plugins)
      if (spec.name == "testprof") loupe::validate_plugin_config(spec, testprof()->descriptor());
  } catch (const loupe::ProfileError& e) {
    return e.what();
  }
  return "";
}

}  // namespace

TEST(Profile, SyntaxErrorHasLineAndColumn) {
  auto e = error_of("[session]\nduration = 5\n[[plugins]\nname = \"x\"\n");
  EXPECT_EQ(e.rfind("p.toml:3:", 0), 0u) << e;
}

TEST(Profile, UnknownKeysAreRefusedWithPosition) {
  auto e = error_of("[session]\nduraton = 5\n");
  EXPECT_NE(e.find("p.toml:2:1: error: unknown key 'duraton' in session; did you mean "
                   "'duration'? (known: duration, interval,"),
            std::string::npos)
      << e;
  e = error_of("[[plugins]]\nname = \"testprof\"\ncuont = 3\n");
  EXPECT_NE(e.find("p.toml:3:1: error: unknown key 'cuont' in plugin 'testprof'; did you mean "
                   "'count'? (known: count, mode"),
            std::string::npos)
      << e;
  e = error_of("[bogus]\n");
  EXPECT_NE(e.find("unknown top-level key 'bogus'"), std::string::npos) << e;
}

TEST(Profile, WrongTypesAndRangesAreRefused) {
  auto e = error_of("[[plugins]]\nname = \"testprof\"\ncount = \"three\"\n");
  EXPECT_NE(e.find("p.toml:3:9: error: plugin 'testprof'.count: expected integer, found string"),
            std::string::npos)
      << e;
  e = error_of("[[plugins]]\nname = \"testprof\"\ncount = 11\n");
  EXPECT_NE(e.find("p.toml:3:9: error: plugin 'testprof'.count: 11 is out of range [1, 10]"),
            std::string::npos)
      << e;
  e = error_of("[[plugins]]\nname = \"testprof\"\ncount = 99999999999999999999\n");
  EXPECT_NE(e.find("p.toml:3:"), std::string::npos) << e;
  e = error_of("[session]\nduration = -1\n");
  EXPECT_NE(e.find("p.toml:2:12: error: session.duration: -1 is out of range"), std::string::npos)
      << e;
  e = error_of("[session]\npid = \"x\"\n");
  EXPECT_NE(e.find("p.toml:2:7: error: session.pid: expected integer, found string"),
            std::string::npos)
      << e;
  e = error_of("[session]\ndrain_timeout = 601\n");
  EXPECT_NE(e.find("p.toml:2:17: error: session.drain_timeout: 601 is out of range [0, 600]"),
            std::string::npos)
      << e;
  e = error_of("[session]\ncommand = 3\n");
  EXPECT_NE(e.find("session.command: expected a string or an array of strings, found integer"),
            std::string::npos)
      << e;
}

TEST(Profile, WindowKeysAreHeldToTheirBoundsAllAtOnce) {
  auto p = loupe::parse_profile_text("[session]\nrotate = 60\nretain = 24\nretain_bytes = 1000\n",
                                     "p.toml");
  EXPECT_EQ(p.session.rotate_s, 60);
  EXPECT_EQ(p.session.retain, 24u);
  EXPECT_EQ(p.session.retain_bytes, 1000u);
  auto e = error_of("[session]\nrotate = 0.5\nretain = -1\n");
  EXPECT_NE(e.find("p.toml:2:10: error: session.rotate: 0.5 is under 1 second"), std::string::npos)
      << e;
  EXPECT_NE(e.find("p.toml:3:10: error: session.retain: -1 is out of range"), std::string::npos)
      << e;
  e = error_of("[session]\nretain = 5\n");
  EXPECT_NE(e.find("p.toml:2:10: error: session.retain: keeps windows, and there are none "
                   "without `rotate`"),
            std::string::npos)
      << e;
  e = error_of("[session]\nrotate = 90000\n");
  EXPECT_NE(e.find("session.rotate: 90000 is out of range [0, 86400]"), std::string::npos) << e;
}

TEST(Profile, ABudgetIsAPercentageOfTheMachine) {
  EXPECT_EQ(loupe::parse_profile_text("[session]\nmax_cpu_percent = 1.5\n", "p.toml")
                .session.max_cpu_percent,
            1.5);
  auto e = error_of("[session]\nmax_cpu_percent = 150\n");
  EXPECT_NE(e.find("p.toml:2:19: error: session.max_cpu_percent: 150 is not a percentage"),
            std::string::npos)
      << e;
  e = error_of("[session]\nmax_cpu_percent = -1\n");
  EXPECT_NE(e.find("session.max_cpu_percent: -1 is not a percentage"), std::string::npos) << e;
}

TEST(Profile, TheDeliveryDelayIsMillisecondsTheReaderCanWaitOn) {
  EXPECT_EQ(loupe::parse_profile_text("[session]\n", "p.toml").session.delivery_delay_ms, 20u);
  EXPECT_EQ(loupe::parse_profile_text("[session]\ndelivery_delay_ms = 250\n", "p.toml")
                .session.delivery_delay_ms,
            250u);
  // 0 would make the reader spin on its rings; past 10 s a record outlives a report.
  for (const char* bad : {"0", "10001", "0.5"}) {
    auto e = error_of(std::string("[session]\ndelivery_delay_ms = ") + bad + "\n");
    EXPECT_NE(e.find("p.toml:2:21: error: "), std::string::npos) << e;
    EXPECT_NE(e.find("delivery_delay_ms"), std::string::npos) << e;
  }
}

TEST(Profile, FollowDefaultsToTheWholeTreeAndIsABoolean) {
  EXPECT_TRUE(loupe::parse_profile_text("[session]\n", "p.toml").session.follow);
  EXPECT_FALSE(loupe::parse_profile_text("[session]\nfollow = false\n", "p.toml").session.follow);
  auto e = error_of("[session]\nfollow = \"no\"\n");
  EXPECT_NE(e.find("p.toml:2:10: error: session.follow: expected boolean, found string"),
            std::string::npos)
      << e;
}

TEST(Profile, NestedTablesAreValidated) {
  auto e = error_of("[[plugins]]\nname = \"testprof\"\n[[plugins.targets]]\nweight = 0\n");
  EXPECT_NE(e.find("targets[0].weight: 0 is out of range [1, 100]"), std::string::npos) << e;
  EXPECT_NE(e.find("required key 'name' is missing"), std::string::npos) << e;
}

TEST(Profile, AllErrorsAreReportedAtOnce) {
  auto e = error_of("[session]\nduraton = 5\ninterval = \"x\"\n");
  EXPECT_NE(e.find("duraton"), std::string::npos);
  EXPECT_NE(e.find("session.interval"), std::string::npos);
}

// A session adds the plugins' errors to those of [session] and the profile's shape: the
// reader collects, it does not stop at them.
TEST(Profile, ReadCollectsEveryErrorWithoutThrowing) {
  std::vector<loupe::Diagnostic> diags;
  auto p = loupe::read_profile_text(
      "[session]\nduration = -1\nstats = 1\n[[plugins]]\nname = \"testprof\"\ncuont = 1\n"
      "[[sinks]]\n",
      "p.toml", diags);
  ASSERT_EQ(diags.size(), 3u);
  ASSERT_EQ(p.plugins.size(), 1u);  // the valid entry is there to be validated
  EXPECT_THROW(loupe::validate_plugin_config(p.plugins[0], testprof()->descriptor()),
               loupe::ProfileError);
}

TEST(Profile, SessionValuesAreServedWithDefaults) {
  auto p = loupe::parse_profile_text(
      "[session]\ninterval = 1\npid = 42\non_plugin_error = \"continue\"\nstats = true\n"
      "command = [\"a\", \"b\"]\nuser = \"nobody\"\n",
      "p.toml");
  const auto& s = p.session;
  EXPECT_DOUBLE_EQ(s.duration_s, 0);
  EXPECT_DOUBLE_EQ(s.interval_s, 1);
  EXPECT_DOUBLE_EQ(s.drain_timeout_s, 2);
  EXPECT_EQ(s.output_dir, "loupe-out");
  EXPECT_EQ(s.pid, 42);
  EXPECT_TRUE(s.continue_on_plugin_error);
  EXPECT_TRUE(s.stats);
  EXPECT_TRUE(s.follow);
  EXPECT_FALSE(s.allow_insecure_plugins);
  EXPECT_EQ(s.command, (std::vector<std::string>{"a", "b"}));
  EXPECT_EQ(s.user, "nobody");
  EXPECT_EQ(loupe::parse_profile_text("[session]\ncommand = \"make\"\n", "p.toml").session.command,
            std::vector<std::string>{"make"});
}

TEST(Profile, DefaultsAreAppliedAndValuesServed) {
  auto p = loupe::parse_profile_text(
      "[session]\nduration = 2\noutput_dir = \"o\"\n[[plugins]]\nname = \"testprof\"\ncount = 4\n"
      "[[plugins.targets]]\nname = \"a\"\n[[sinks]]\nname = \"jsonl\"\n",
      "p.toml");
  ASSERT_EQ(p.plugins.size(), 2u);
  EXPECT_DOUBLE_EQ(p.session.duration_s, 2.0);
  EXPECT_EQ(p.session.output_dir, "o");
  EXPECT_EQ(p.plugins[1].kind, loupe::PluginSpec::Kind::kSink);
  auto& spec = p.plugins[0];
  loupe::validate_plugin_config(spec, testprof()->descriptor());
  std::int64_t count = 0;
  ASSERT_EQ(loupe::config_int(spec.config.get(), "count", &count), LOUPE_OK);
  EXPECT_EQ(count, 4);
  const char* mode = nullptr;
  ASSERT_EQ(loupe::config_string(spec.config.get(), "mode", &mode), LOUPE_OK);
  EXPECT_STREQ(mode, "fast");
  double ratio = 0;
  ASSERT_EQ(loupe::config_float(spec.config.get(), "ratio", &ratio), LOUPE_OK);
  EXPECT_DOUBLE_EQ(ratio, 0.5);
  std::uint32_t n = 0;
  ASSERT_EQ(loupe::config_list_len(spec.config.get(), "targets", &n), LOUPE_OK);
  ASSERT_EQ(n, 1u);
  const loupe_config* t = nullptr;
  ASSERT_EQ(loupe::config_list_table(spec.config.get(), "targets", 0, &t), LOUPE_OK);
  std::int64_t w = 0;
  ASSERT_EQ(loupe::config_int(t, "weight", &w), LOUPE_OK);
  EXPECT_EQ(w, 1);
  EXPECT_EQ(loupe::config_int(spec.config.get(), "mode", &w), LOUPE_ERR_INVALID_ARG);
  EXPECT_EQ(loupe::config_int(spec.config.get(), "nope", &w), LOUPE_ERR_NOT_FOUND);
}

TEST(Profile, MissingFileIsAClearError) {
  try {
    loupe::parse_profile_file("/nonexistent/p.toml");
    FAIL();
  } catch (const loupe::ProfileError& e) {
    // No line to point at: the file, without a made-up 0:0.
    EXPECT_EQ(std::string(e.what()),
              "/nonexistent/p.toml: error: cannot read profile: no such file");
  }
}

// A runtime's keys are its own table's, declared by its row of the runtime table: the
// profile's validator checks them as a plugin's, and names no runtime itself.
TEST(Profile, ARuntimeTakesItsOwnKeysInATableOfItsOwn) {
  auto p = loupe::parse_profile_text("[runtimes.hotspot]\nperf_map = true\n", "p.toml");
  ASSERT_TRUE(p.session.runtimes.count("hotspot"));
  EXPECT_TRUE(p.session.runtimes.at("hotspot")->values.at("perf_map").b);
  // Without the table: every runtime of the table still gets its defaults.
  p = loupe::parse_profile_text("[session]\nduration = 1\n", "p.toml");
  ASSERT_TRUE(p.session.runtimes.count("hotspot"));
  EXPECT_FALSE(p.session.runtimes.at("hotspot")->values.at("perf_map").b);
  EXPECT_TRUE(p.session.runtimes.count("python"));

  // Every error at once, each where it is.
  auto e = error_of(
      "[runtimes.hotspt]\nperf_map = true\n[runtimes.python]\nframes = 1\n"
      "[runtimes.hotspot]\nperf_map = 3\n");
  EXPECT_NE(e.find("p.toml:1:11: error: unknown runtime 'hotspt' in runtimes; did you mean "
                   "'hotspot'? (known: python, hotspot, v8)"),
            std::string::npos)
      << e;
  EXPECT_NE(e.find("p.toml:4:1: error: unknown key 'frames' in runtimes.python"), std::string::npos)
      << e;
  EXPECT_NE(e.find("p.toml:6:12: error: runtimes.hotspot.perf_map: expected boolean"),
            std::string::npos)
      << e;
  // The key that was [session]'s before runtimes had tables of their own.
  e = error_of("[session]\njvm_perf_map = true\n");
  EXPECT_NE(e.find("p.toml:2:1: error: unknown key 'jvm_perf_map' in session"), std::string::npos)
      << e;
}
