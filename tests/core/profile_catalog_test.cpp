// Profiles by name: the search order, shadowing, what stays a path, and the "did you mean".
#include <gtest/gtest.h>
#include <stdlib.h>
#include <unistd.h>

#include <fstream>

#include "loupe/profile_catalog.hpp"

namespace fs = std::filesystem;

namespace {

// A fresh directory, removed with everything in it when the test ends.
class TempDir {
 public:
  TempDir() {
    std::string tmpl = (fs::temp_directory_path() / "loupe-profiles.XXXXXX").string();
    path_ = ::mkdtemp(tmpl.data());
  }
  ~TempDir() { fs::remove_all(path_); }
  const fs::path& path() const { return path_; }
  fs::path write(const std::string& file, const std::string& text) const {
    fs::create_directories((path_ / file).parent_path());
    std::ofstream(path_ / file) << text;
    return path_ / file;
  }

 private:
  fs::path path_;
};

// Sets (or unsets, with nullptr) an environment variable for one test.
class ScopedEnv {
 public:
  ScopedEnv(const char* name, const char* value) : name_(name) {
    if (const char* old = std::getenv(name)) old_ = old;
    value ? ::setenv(name, value, 1) : ::unsetenv(name);
  }
  ~ScopedEnv() { old_ ? ::setenv(name_, old_->c_str(), 1) : ::unsetenv(name_); }

 private:
  const char* name_;
  std::optional<std::string> old_;
};

std::string not_found_message(const loupe::ProfileCatalog& catalog, const std::string& name) {
  try {
    catalog.resolve(name);
  } catch (const loupe::ProfileNotFound& e) {
    return e.what();
  }
  return "";
}

}  // namespace

TEST(ProfileCatalog, FirstDirectoryWinsAndLaterOnesAreShadowed) {
  TempDir a, b, c;
  b.write("cpu.toml", "# cpu from b\n");
  c.write("cpu.toml", "# cpu from c\n");
  c.write("offcpu.toml", "# offcpu from c\n");
  a.write("notes.txt", "not a profile\n");
  a.write(".toml", "no name\n");
  loupe::ProfileCatalog catalog({{a.path(), "first"}, {b.path(), "second"}, {c.path(), "third"}});

  auto all = catalog.list();
  ASSERT_EQ(all.size(), 2u);
  EXPECT_EQ(all[0].name, "cpu");
  EXPECT_EQ(all[0].path, b.path() / "cpu.toml");
  EXPECT_EQ(all[0].origin, "second");
  EXPECT_EQ(all[0].summary, "cpu from b");
  ASSERT_EQ(all[0].shadowed.size(), 1u);
  EXPECT_EQ(all[0].shadowed[0].origin, "third");
  EXPECT_EQ(all[1].name, "offcpu");
  EXPECT_EQ(all[1].origin, "third");
  EXPECT_TRUE(all[1].shadowed.empty());

  EXPECT_EQ(catalog.resolve("cpu"), b.path() / "cpu.toml");
  EXPECT_EQ(catalog.resolve("offcpu"), c.path() / "offcpu.toml");
  EXPECT_FALSE(catalog.find("notes"));
}

TEST(ProfileCatalog, EnvironmentThenUserThenTheBuildTree) {
  TempDir env1, env2, config;
  // The build tree's own cpu profile, shadowed by a user's copy, shadowed by the env's.
  config.write("loupe/profiles/cpu.toml", "# the user's cpu\n");
  config.write("loupe/profiles/mine.toml", "# only the user's\n");
  env2.write("cpu.toml", "# the env's cpu\n");
  std::string path_env = env1.path().string() + "::" + env2.path().string();
  ScopedEnv p("LOUPE_PROFILE_PATH", path_env.c_str());
  ScopedEnv x("XDG_CONFIG_HOME", config.path().c_str());

  auto dirs = loupe::ProfileCatalog::default_search_dirs();
  ASSERT_EQ(dirs.size(), 4u);  // the empty entry between the colons is no directory
  EXPECT_EQ(dirs[0].path, env1.path());
  EXPECT_EQ(dirs[0].origin, "LOUPE_PROFILE_PATH");
  EXPECT_EQ(dirs[1].path, env2.path());
  EXPECT_EQ(dirs[2].path, config.path() / "loupe" / "profiles");
  EXPECT_EQ(dirs[2].origin, "user");
  // This test runs from the build tree's bin/, as build/bin/loupe does: not "installed".
  EXPECT_EQ(dirs[3].path, fs::path(LOUPE_SOURCE_DIR) / "profiles");
  EXPECT_EQ(dirs[3].origin, "build tree");

  loupe::ProfileCatalog catalog;
  auto cpu = catalog.find("cpu");
  ASSERT_TRUE(cpu);
  EXPECT_EQ(cpu->path, env2.path() / "cpu.toml");
  ASSERT_EQ(cpu->shadowed.size(), 2u);
  EXPECT_EQ(cpu->shadowed[0].origin, "user");
  EXPECT_EQ(cpu->shadowed[1].origin, "build tree");
  EXPECT_EQ(catalog.resolve("mine"), config.path() / "loupe" / "profiles" / "mine.toml");
  auto offcpu = catalog.find("offcpu");
  ASSERT_TRUE(offcpu);
  EXPECT_EQ(offcpu->origin, "build tree");
}

TEST(ProfileCatalog, UserDirectoryFallsBackToHome) {
  TempDir home;
  ScopedEnv p("LOUPE_PROFILE_PATH", nullptr);
  ScopedEnv h("HOME", home.path().c_str());
  for (const char* xdg : {static_cast<const char*>(nullptr), "", "relative/dir"}) {
    // The XDG spec: unset, empty or relative all mean $HOME/.config.
    ScopedEnv x("XDG_CONFIG_HOME", xdg);
    auto dirs = loupe::ProfileCatalog::default_search_dirs();
    ASSERT_FALSE(dirs.empty());
    EXPECT_EQ(dirs[0].path, home.path() / ".config" / "loupe" / "profiles")
        << (xdg ? xdg : "unset");
    EXPECT_EQ(dirs[0].origin, "user");
  }
}

TEST(ProfileCatalog, PathsStayPaths) {
  TempDir cwd;
  cwd.write("plain", "[session]\n");
  fs::create_directories(cwd.path() / "net");
  auto old = fs::current_path();
  fs::current_path(cwd.path());
  EXPECT_TRUE(loupe::ProfileCatalog::is_name("cpu"));
  EXPECT_FALSE(loupe::ProfileCatalog::is_name("cpu.toml"));
  EXPECT_FALSE(loupe::ProfileCatalog::is_name("./cpu"));
  EXPECT_FALSE(loupe::ProfileCatalog::is_name("profiles/cpu"));
  EXPECT_FALSE(loupe::ProfileCatalog::is_name("."));
  EXPECT_FALSE(loupe::ProfileCatalog::is_name(""));
  EXPECT_FALSE(loupe::ProfileCatalog::is_name("plain"));  // a file here is read as before
  EXPECT_TRUE(loupe::ProfileCatalog::is_name("net"));     // a folder here hides no profile
  loupe::ProfileCatalog empty(std::vector<loupe::ProfileDir>{});
  // A path is handed on untouched, found or not: reading it reports what is wrong with it.
  EXPECT_EQ(empty.resolve("nope.toml"), fs::path("nope.toml"));
  EXPECT_EQ(empty.resolve("plain"), fs::path("plain"));
  fs::current_path(old);
}

TEST(ProfileCatalog, MisspeltNameSuggestsTheNearestAndListsTheRest) {
  TempDir d;
  for (const char* n : {"cpu", "offcpu", "latency", "memory"})
    d.write(std::string(n) + ".toml", "");
  loupe::ProfileCatalog catalog({{d.path(), "test"}});

  auto m = not_found_message(catalog, "latnecy");
  EXPECT_NE(m.find("no profile named 'latnecy'; did you mean 'latency'?"), std::string::npos) << m;
  EXPECT_NE(m.find("profiles: cpu, latency, memory, offcpu"), std::string::npos) << m;
  EXPECT_NE(m.find(d.path().string()), std::string::npos) << m;
  m = not_found_message(catalog, "ofcpu");
  EXPECT_NE(m.find("did you mean 'offcpu'?"), std::string::npos) << m;
  // Nothing near: the list, no guess.
  m = not_found_message(catalog, "network");
  EXPECT_NE(m.find("no profile named 'network'"), std::string::npos) << m;
  EXPECT_EQ(m.find("did you mean"), std::string::npos) << m;
}

TEST(ProfileCatalog, SummaryIsTheFirstCommentLine) {
  TempDir d;
  d.write("a.toml", "\n#\n#   Two spaces, trailing blanks.  \n# second line\n[session]\n");
  d.write("b.toml", "[session]\n# a comment after the first table is no summary\n");
  d.write("c.toml", "");
  loupe::ProfileCatalog catalog({{d.path(), "test"}});
  EXPECT_EQ(catalog.find("a")->summary, "Two spaces, trailing blanks.");
  EXPECT_EQ(catalog.find("b")->summary, "");
  EXPECT_EQ(catalog.find("c")->summary, "");
}

TEST(ProfileCatalog, TheSameDirectoryTwiceIsSearchedOnce) {
  TempDir d;
  d.write("cpu.toml", "");
  loupe::ProfileCatalog catalog({{d.path(), "one"}, {d.path() / "." / "", "two"}});
  ASSERT_EQ(catalog.search_dirs().size(), 1u);
  EXPECT_TRUE(catalog.find("cpu")->shadowed.empty());
}
