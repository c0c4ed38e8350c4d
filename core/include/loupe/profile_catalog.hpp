// SPDX-License-Identifier: Apache-2.0
//
// Finds profiles by name, so `loupe run cpu` needs no path. A name is NAME.toml in the first
// of these directories that has it:
//   1. $LOUPE_PROFILE_PATH, colon-separated, in its order
//   2. the user's: $XDG_CONFIG_HOME/loupe/profiles (default ~/.config/loupe/profiles)
//   3. the installed ones: <prefix>/share/loupe/profiles, where <prefix> is the running
//      executable's (/proc/self/exe/../..), so a package relocated to /opt finds its own
//   4. for an executable of the build tree, the source tree's profiles/ (the build tree
//      mirrors the install layout for plugins, not for profiles: they are edited in place)
// Anything that looks like a path stays one (is_name()), and is read exactly as given.
#ifndef LOUPE_PROFILE_CATALOG_HPP
#define LOUPE_PROFILE_CATALOG_HPP

#include <filesystem>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

namespace loupe {

// A name that no directory holds. what() names the nearest known name ("did you mean"),
// every known name and every directory searched.
class ProfileNotFound : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

struct ProfileDir {
  std::filesystem::path path;
  std::string
      origin;  // why it is searched: "LOUPE_PROFILE_PATH", "user", "installed", "build tree"
};

struct ProfileEntry {
  std::string name;  // the file name without ".toml"
  std::filesystem::path path;
  std::string origin;   // its directory's
  std::string summary;  // the text of the file's first comment line ("" if it has none)
  // Files of the same name in later directories: present, never read by name.
  std::vector<ProfileDir> shadowed;
};

class ProfileCatalog {
 public:
  explicit ProfileCatalog(std::vector<ProfileDir> dirs = default_search_dirs());
  // The directories above, in order, each once; absent ones are kept (listed as searched).
  static std::vector<ProfileDir> default_search_dirs();

  // Whether `arg` is looked up by name: not empty, no '/', no ".toml" ending, not "." or
  // "..", and no regular file of that name in the working directory (which keeps working as
  // the path it always was). A directory of that name does not make it a path: a project
  // folder called "net" must not hide the net profile.
  static bool is_name(const std::string& arg);

  // Every name found, sorted, each with the file that wins it.
  std::vector<ProfileEntry> list() const;
  std::optional<ProfileEntry> find(const std::string& name) const;
  // The file `arg` means: itself when it is not a name, else the named profile's path.
  // Throws ProfileNotFound.
  std::filesystem::path resolve(const std::string& arg) const;

  const std::vector<ProfileDir>& search_dirs() const { return dirs_; }

 private:
  std::vector<ProfileDir> dirs_;
};

}  // namespace loupe

#endif  // LOUPE_PROFILE_CATALOG_HPP
