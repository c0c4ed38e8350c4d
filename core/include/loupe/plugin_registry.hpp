// SPDX-License-Identifier: Apache-2.0
//
// Finds plugin libraries and keeps the loaded ones by name (duplicates refused).
// Search order: explicit paths from the profile, $LOUPE_PLUGIN_PATH (colon-separated),
// <exe>/../lib/loupe/plugins (build tree and install prefix alike), the configured
// install directory.
#ifndef LOUPE_PLUGIN_REGISTRY_HPP
#define LOUPE_PLUGIN_REGISTRY_HPP

#include <filesystem>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "loupe/plugin_library.hpp"

namespace loupe {

class PluginRegistry {
 public:
  struct Rejection {
    std::string path;
    std::string reason;
  };

  explicit PluginRegistry(std::vector<std::filesystem::path> search_dirs = default_search_dirs());
  static std::vector<std::filesystem::path> default_search_dirs();

  // Adds a loaded library; throws PluginLoadError when its name is taken.
  std::shared_ptr<PluginLibrary> add(std::shared_ptr<PluginLibrary> lib);
  // Loads the library at `path` (profile `path = ...`) and adds it.
  std::shared_ptr<PluginLibrary> load_path(const std::filesystem::path& path);
  // Finds `name`: already loaded, else loupe-<name>.so in the search dirs, else any
  // library in them declaring that name. Throws PluginLoadError naming where it looked.
  std::shared_ptr<PluginLibrary> resolve(const std::string& name);
  // Loads every library in the search dirs (for list/describe); failures become rejections.
  void scan_all();

  std::vector<std::shared_ptr<PluginLibrary>> loaded() const;
  const std::vector<Rejection>& rejections() const { return rejections_; }
  const std::vector<std::filesystem::path>& search_dirs() const { return dirs_; }

  // A plugin runs with loupe's privileges: by default a library that a group or other
  // users could have written (the file, or a directory on its path that is not a sticky
  // root-owned one like /tmp) is refused. `allow` lifts that (--allow-insecure-plugins).
  void set_allow_insecure(bool allow) { allow_insecure_ = allow; }
  // Why `path` (canonical) may not be loaded, or nullopt when it may.
  static std::optional<std::string> insecure_path_reason(const std::filesystem::path& path);

 private:
  std::shared_ptr<PluginLibrary> try_load(const std::filesystem::path& path);
  std::vector<std::filesystem::path> candidates() const;
  // Throws PluginLoadError with insecure_path_reason() unless insecure paths are allowed.
  void check_secure(const std::filesystem::path& canonical) const;

  std::vector<std::filesystem::path> dirs_;
  std::map<std::string, std::shared_ptr<PluginLibrary>> by_name_;
  std::map<std::string, std::shared_ptr<PluginLibrary>> by_path_;
  std::vector<Rejection> rejections_;
  bool allow_insecure_ = false;
};

}  // namespace loupe

#endif  // LOUPE_PLUGIN_REGISTRY_HPP
