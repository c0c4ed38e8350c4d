// SPDX-License-Identifier: Apache-2.0
#include "loupe/plugin_registry.hpp"

#include "plugins/config_schema.hpp"

#include <fmt/format.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <set>

namespace loupe {
namespace fs = std::filesystem;

namespace {

std::string mode_text(mode_t m) {
  return fmt::format("{:04o}", m & 07777);
}

}  // namespace

std::optional<std::string> PluginRegistry::insecure_path_reason(const fs::path& path) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) return std::nullopt;  // the loader reports a missing file
  const std::string hint =
      "fix the permissions, or allow it with --allow-insecure-plugins / [session] "
      "allow_insecure_plugins = true";
  if (st.st_mode & (S_IWGRP | S_IWOTH))
    return fmt::format(
        "{}: refusing to load a plugin from a group/world-writable file (mode {}); {}",
        path.string(), mode_text(st.st_mode), hint);
  // Whoever can write a directory on the path can replace what is below it; a sticky
  // directory owned by root (/tmp) only lets owners rename their own entries.
  for (fs::path dir = path.parent_path();; dir = dir.parent_path()) {
    if (::stat(dir.c_str(), &st) == 0 && (st.st_mode & (S_IWGRP | S_IWOTH)) &&
        !((st.st_mode & S_ISVTX) && st.st_uid == 0))
      return fmt::format(
          "{}: refusing to load a plugin from a group/world-writable directory {} (mode {}); {}",
          path.string(), dir.string(), mode_text(st.st_mode), hint);
    if (dir == dir.root_path() || dir.empty()) break;
  }
  return std::nullopt;
}

void PluginRegistry::check_secure(const fs::path& canonical) const {
  if (allow_insecure_) return;
  if (auto why = insecure_path_reason(canonical)) throw PluginLoadError(*why);
}

PluginRegistry::PluginRegistry(std::vector<fs::path> search_dirs) : dirs_(std::move(search_dirs)) {}

std::vector<fs::path> PluginRegistry::default_search_dirs() {
  std::vector<fs::path> dirs;
  if (const char* env = std::getenv("LOUPE_PLUGIN_PATH")) {
    std::string s(env);
    std::size_t start = 0;
    while (start <= s.size()) {
      std::size_t end = s.find(':', start);
      if (end == std::string::npos) end = s.size();
      if (end > start) dirs.emplace_back(s.substr(start, end - start));
      start = end + 1;
    }
  }
  std::error_code ec;
  fs::path exe = fs::read_symlink("/proc/self/exe", ec);
  if (!ec)
    dirs.push_back((exe.parent_path() / ".." / "lib" / "loupe" / "plugins").lexically_normal());
#ifdef LOUPE_PLUGIN_INSTALL_DIR
  dirs.emplace_back(LOUPE_PLUGIN_INSTALL_DIR);
#endif
  // Keep the first occurrence of each directory.
  std::vector<fs::path> unique;
  std::set<std::string> seen;
  for (auto& d : dirs)
    if (seen.insert(d.lexically_normal().string()).second) unique.push_back(d);
  return unique;
}

std::shared_ptr<PluginLibrary> PluginRegistry::add(std::shared_ptr<PluginLibrary> lib) {
  auto it = by_name_.find(lib->name());
  if (it != by_name_.end()) {
    if (it->second->origin() == lib->origin()) return it->second;
    throw PluginLoadError(fmt::format("{}: plugin name '{}' is already provided by {}",
                                      lib->origin(), lib->name(), it->second->origin()));
  }
  by_name_[lib->name()] = lib;
  by_path_[lib->origin()] = lib;
  return lib;
}

std::shared_ptr<PluginLibrary> PluginRegistry::load_path(const fs::path& path) {
  std::error_code ec;
  fs::path canon = fs::weakly_canonical(path, ec);
  if (ec || !fs::exists(canon))
    throw PluginLoadError(fmt::format("{}: plugin library not found", path.string()));
  if (auto it = by_path_.find(canon.string()); it != by_path_.end()) return it->second;
  check_secure(canon);
  return add(PluginLibrary::open(canon));
}

std::vector<fs::path> PluginRegistry::candidates() const {
  std::vector<fs::path> out;
  for (const auto& d : dirs_) {
    std::error_code ec;
    if (!fs::is_directory(d, ec)) continue;
    std::vector<fs::path> here;
    for (const auto& e : fs::directory_iterator(d, ec)) {
      auto fn = e.path().filename().string();
      if (e.is_regular_file() && fn.ends_with(".so")) here.push_back(e.path());
    }
    std::sort(here.begin(), here.end());
    out.insert(out.end(), here.begin(), here.end());
  }
  return out;
}

std::shared_ptr<PluginLibrary> PluginRegistry::try_load(const fs::path& path) {
  std::error_code ec;
  fs::path canon = fs::weakly_canonical(path, ec);
  if (auto it = by_path_.find(canon.string()); it != by_path_.end()) return it->second;
  try {
    check_secure(canon);
    return add(PluginLibrary::open(canon));
  } catch (const PluginLoadError& e) {
    rejections_.push_back({canon.string(), e.what()});
    return nullptr;
  }
}

std::shared_ptr<PluginLibrary> PluginRegistry::resolve(const std::string& name) {
  if (auto it = by_name_.find(name); it != by_name_.end()) return it->second;
  for (const auto& d : dirs_) {
    fs::path p = d / ("loupe-" + name + ".so");
    std::error_code ec;
    if (!fs::exists(p, ec)) continue;
    std::error_code ec2;
    fs::path canon = fs::weakly_canonical(p, ec2);
    check_secure(canon);
    auto lib = PluginLibrary::open(canon);  // a broken library by that name is a hard error
    if (lib->name() != name)
      throw PluginLoadError(fmt::format("{}: expected plugin '{}' by its file name, found '{}'",
                                        canon.string(), name, lib->name()));
    return add(lib);
  }
  for (const auto& p : candidates()) {
    auto lib = try_load(p);
    if (lib && lib->name() == name) return lib;
  }
  std::string where;
  for (const auto& d : dirs_) where += "\n  " + d.string();
  // Every candidate is loaded by now, so the known names are complete.
  std::vector<std::string> known;
  for (const auto& [n, lib] : by_name_) known.push_back(n);
  std::string hint = nearest_name(name, known);
  throw PluginLoadError(fmt::format(
      "plugin '{}' not found{} (looked for loupe-{}.so in:{}\n  set LOUPE_PLUGIN_PATH or "
      "give `library = \"/path/to/loupe-NAME.so\"` in the profile)",
      name, hint.empty() ? "" : fmt::format("; did you mean '{}'?", hint), name, where));
}

void PluginRegistry::scan_all() {
  for (const auto& p : candidates()) try_load(p);
}

std::vector<std::shared_ptr<PluginLibrary>> PluginRegistry::loaded() const {
  std::vector<std::shared_ptr<PluginLibrary>> out;
  for (const auto& [_, lib] : by_name_) out.push_back(lib);
  return out;
}

}  // namespace loupe
