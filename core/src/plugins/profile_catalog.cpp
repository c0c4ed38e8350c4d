// SPDX-License-Identifier: Apache-2.0
#include "loupe/profile_catalog.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <pwd.h>
#include <unistd.h>

#include <cstdlib>
#include <fstream>
#include <map>
#include <set>

#include "plugins/config_schema.hpp"

namespace loupe {
namespace fs = std::filesystem;
namespace {

constexpr std::string_view kExtension = ".toml";

std::string env(const char* name) {
  const char* v = std::getenv(name);
  return v ? v : "";
}

// The XDG base directory spec: a relative $XDG_CONFIG_HOME is invalid and ignored.
std::optional<fs::path> user_config_home() {
  if (fs::path xdg = env("XDG_CONFIG_HOME"); xdg.is_absolute()) return xdg;
  std::string home = env("HOME");
  if (home.empty()) {
    // A service started without HOME still has a user with a home directory.
    if (const passwd* pw = ::getpwuid(::getuid()); pw && pw->pw_dir) home = pw->pw_dir;
  }
  if (home.empty()) return std::nullopt;
  return fs::path(home) / ".config";
}

bool is_build_tree_executable([[maybe_unused]] const fs::path& exe) {
#ifdef LOUPE_BUILD_BIN_DIR
  std::error_code ec;
  return fs::equivalent(exe.parent_path(), LOUPE_BUILD_BIN_DIR, ec);
#else
  return false;
#endif
}

// The text of the first comment line, read up to the first line that is not a comment:
// profiles open with what they are for ("# On-CPU sampling: ...").
std::string first_comment(const fs::path& path) {
  std::ifstream in(path);
  std::string line;
  for (int n = 0; n < 64 && std::getline(in, line); ++n) {
    auto start = line.find_first_not_of(" \t\r");
    if (start == std::string::npos) continue;
    if (line[start] != '#') return "";
    auto text = line.find_first_not_of("# \t", start);
    if (text == std::string::npos) continue;  // a bare "#" separates paragraphs
    auto end = line.find_last_not_of(" \t\r");
    return line.substr(text, end + 1 - text);
  }
  return "";
}

bool ends_with_extension(const std::string& s) {
  return s.size() >= kExtension.size() &&
         s.compare(s.size() - kExtension.size(), kExtension.size(), kExtension) == 0;
}

}  // namespace

ProfileCatalog::ProfileCatalog(std::vector<ProfileDir> dirs) {
  std::set<std::string> seen;
  for (auto& d : dirs)
    if (seen.insert((d.path / "").lexically_normal().string()).second)
      dirs_.push_back(std::move(d));
}

std::vector<ProfileDir> ProfileCatalog::default_search_dirs() {
  std::vector<ProfileDir> dirs;
  std::string path_env = env("LOUPE_PROFILE_PATH");
  for (std::size_t start = 0; start <= path_env.size();) {
    std::size_t end = std::min(path_env.find(':', start), path_env.size());
    if (end > start) dirs.push_back({path_env.substr(start, end - start), "LOUPE_PROFILE_PATH"});
    start = end + 1;
  }
  if (auto config = user_config_home()) dirs.push_back({*config / "loupe" / "profiles", "user"});
  std::error_code ec;
  fs::path exe = fs::read_symlink("/proc/self/exe", ec);
  if (!ec) {
#ifdef LOUPE_SOURCE_PROFILE_DIR
    if (is_build_tree_executable(exe)) {
      dirs.push_back({LOUPE_SOURCE_PROFILE_DIR, "build tree"});
      return dirs;
    }
#endif
#ifdef LOUPE_PROFILE_INSTALL_DIR
    dirs.push_back(
        {(exe.parent_path() / ".." / LOUPE_PROFILE_INSTALL_DIR).lexically_normal(), "installed"});
#endif
  }
  return dirs;
}

bool ProfileCatalog::is_name(const std::string& arg) {
  if (arg.empty() || arg == "." || arg == ".." || arg.find('/') != std::string::npos ||
      ends_with_extension(arg))
    return false;
  std::error_code ec;
  return !fs::is_regular_file(arg, ec);
}

std::vector<ProfileEntry> ProfileCatalog::list() const {
  std::map<std::string, ProfileEntry> found;
  for (const auto& dir : dirs_) {
    std::error_code ec;
    // An absent or unreadable directory holds nothing; `loupe profiles` still names it.
    for (fs::directory_iterator it(dir.path, ec), end; !ec && it != end; it.increment(ec)) {
      std::string file = it->path().filename().string();
      std::error_code type_ec;
      if (!ends_with_extension(file) || file.size() == kExtension.size() ||
          !fs::is_regular_file(it->path(), type_ec))
        continue;
      std::string name = file.substr(0, file.size() - kExtension.size());
      auto [pos, fresh] = found.try_emplace(name);
      if (!fresh) {
        pos->second.shadowed.push_back(dir);
        continue;
      }
      pos->second = ProfileEntry{name, it->path(), dir.origin, first_comment(it->path()), {}};
    }
  }
  std::vector<ProfileEntry> out;
  for (auto& [_, e] : found) out.push_back(std::move(e));
  return out;
}

std::optional<ProfileEntry> ProfileCatalog::find(const std::string& name) const {
  for (auto& e : list())
    if (e.name == name) return e;
  return std::nullopt;
}

fs::path ProfileCatalog::resolve(const std::string& arg) const {
  if (!is_name(arg)) return arg;
  auto all = list();
  std::vector<std::string> known;
  for (auto& e : all) {
    if (e.name == arg) return e.path;
    known.push_back(e.name);
  }
  std::vector<std::string> searched;
  for (const auto& d : dirs_) searched.push_back(d.path.string());
  std::string hint = nearest_name(arg, known);
  throw ProfileNotFound(fmt::format(
      "no profile named '{}'{}\n  profiles: {}\n  searched: {}\n  (`loupe profiles` lists them "
      "with where each comes from; a path such as ./{}.toml is read as given)",
      arg, hint.empty() ? "" : fmt::format("; did you mean '{}'?", hint),
      known.empty() ? "(none)" : fmt::format("{}", fmt::join(known, ", ")),
      fmt::join(searched, ", "), arg));
}

}  // namespace loupe
