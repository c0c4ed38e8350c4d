// Verification check 1 on in-process tables and on real shared objects.
#include <gtest/gtest.h>

#include "loupe/plugin_library.hpp"

namespace {

int setup(const loupe_setup_args*, loupe_plugin**) {
  return 0;
}
int start(loupe_plugin*, const loupe_start_args*) {
  return 0;
}
int consume(loupe_plugin*, const loupe_record*) {
  return 0;
}
void destroy(loupe_plugin*) {}
const char* last_error(loupe_plugin*) {
  return "";
}

loupe_plugin_descriptor good() {
  loupe_plugin_descriptor d{};
  d.size = sizeof(d);
  d.abi_major = LOUPE_ABI_MAJOR;
  d.abi_minor = LOUPE_ABI_MINOR;
  d.kind = LOUPE_KIND_PROFILER;
  d.config_key_size = sizeof(loupe_config_key);
  d.name = "inproc";
  d.version = "1.0.0";
  d.setup = setup;
  d.start = start;
  d.destroy = destroy;
  d.last_error = last_error;
  return d;
}

std::string refusal(const loupe_plugin_descriptor& d) {
  auto e = loupe::check_descriptor(&d, "/x/libfoo.so");
  return e ? *e : "";
}

}  // namespace

TEST(AbiChecks, AcceptsAGoodTable) {
  EXPECT_EQ(refusal(good()), "");
}

TEST(AbiChecks, WrongMajorNamesBothVersionsAndFile) {
  auto d = good();
  d.abi_major = 2;
  auto e = refusal(d);
  EXPECT_NE(e.find("/x/libfoo.so"), std::string::npos) << e;
  EXPECT_NE(e.find("plugin ABI 2.2"), std::string::npos) << e;
  EXPECT_NE(e.find("host ABI 1.2"), std::string::npos) << e;
}

TEST(AbiChecks, NewerMinorRefused) {
  auto d = good();
  d.abi_minor = LOUPE_ABI_MINOR + 1;
  EXPECT_NE(refusal(d).find("newer than host ABI"), std::string::npos) << refusal(d);
}

TEST(AbiChecks, TruncatedTableRefused) {
  auto d = good();
  d.size = 24;
  auto e = refusal(d);
  EXPECT_NE(e.find("truncated"), std::string::npos) << e;
  EXPECT_NE(e.find("found 24"), std::string::npos) << e;
}

TEST(AbiChecks, MissingRequiredHookRefused) {
  auto d = good();
  d.start = nullptr;
  EXPECT_NE(refusal(d).find("lacks the required hook 'start'"), std::string::npos) << refusal(d);
  auto s = good();
  s.kind = LOUPE_KIND_SINK;
  s.start = nullptr;
  EXPECT_NE(refusal(s).find("hook 'consume'"), std::string::npos);
  s.consume = consume;
  EXPECT_EQ(refusal(s), "");  // start is optional for sinks
}

TEST(AbiChecks, BadNamesAndKindsRefused) {
  auto d = good();
  d.name = "Bad Name";
  EXPECT_NE(refusal(d).find("[a-z0-9_-]+"), std::string::npos);
  d = good();
  d.kind = 9;
  EXPECT_NE(refusal(d).find("unknown plugin kind 9"), std::string::npos);
  d = good();
  d.version = nullptr;
  EXPECT_NE(refusal(d).find("no version"), std::string::npos);
}

TEST(AbiChecks, SchemaIsChecked) {
  static const loupe_config_key dup[] = {{"a", LOUPE_CFG_INT, 0, "1", "h"},
                                         {"a", LOUPE_CFG_INT, 0, "1", "h"}};
  static const loupe_config_key nohelp[] = {{"a", LOUPE_CFG_INT, 0, "1", nullptr}};
  static const loupe_config_key badtype[] = {{"a", 42, 0, "1", "h"}};
  static const loupe_config_key reserved[] = {{"library", LOUPE_CFG_STRING, 0, nullptr, "h"}};
  static const loupe_config_key norange[] = {{"a", LOUPE_CFG_INT, 0, "1", "h", 5, 1}};
  struct Case {
    const loupe_config_key* keys;
    const char* expect;
  } cases[] = {{dup, "declared twice"},
               {nohelp, "no help"},
               {badtype, "unknown type 42"},
               {reserved, "reserved by the host"},
               {norange, "min 5 > max 1"}};
  for (auto& c : cases) {
    auto d = good();
    d.config_keys = c.keys;
    d.n_config_keys = c.keys == dup ? 2 : 1;
    EXPECT_NE(refusal(d).find(c.expect), std::string::npos) << refusal(d);
  }
}

TEST(AbiChecks, SharedObjectsAreCheckedOnLoad) {
  struct Case {
    const char* file;
    const char* expect;
  } cases[] = {
      {"loupe-bad-wrong_major.so", "plugin ABI 2.2 is incompatible with host ABI 1.2"},
      {"loupe-bad-newer_minor.so", "plugin ABI 1.3 is newer than host ABI 1.2"},
      {"loupe-bad-truncated.so", "descriptor table truncated"},
      {"loupe-bad-missing_hook.so", "lacks the required hook 'start'"},
      {"loupe-bad-no_entry.so",
       "not a loupe plugin: expected exported symbol 'loupe_plugin_entry'"},
  };
  for (auto& c : cases) {
    std::string path = std::string(BAD_PLUGIN_DIR) + "/" + c.file;
    try {
      loupe::PluginLibrary::open(path);
      ADD_FAILURE() << c.file << " was accepted";
    } catch (const loupe::PluginLoadError& e) {
      std::string msg = e.what();
      EXPECT_NE(msg.find(path), std::string::npos) << msg;
      EXPECT_NE(msg.find(c.expect), std::string::npos) << msg;
    }
  }
}

TEST(AbiChecks, NonElfFileIsRefused) {
  std::string path = ::testing::TempDir() + "/loupe-garbage.so";
  FILE* f = fopen(path.c_str(), "w");
  fputs("not an ELF file", f);
  fclose(f);
  try {
    loupe::PluginLibrary::open(path);
    ADD_FAILURE() << "garbage accepted";
  } catch (const loupe::PluginLoadError& e) {
    EXPECT_NE(std::string(e.what()).find("cannot load shared library"), std::string::npos)
        << e.what();
  }
}
