// SPDX-License-Identifier: Apache-2.0
#include "cgroup_id.hpp"

#include <sys/stat.h>

#include <algorithm>
#include <cctype>

#include "loupe/sdk/plugin.hpp"

namespace loupe::cpusample {

std::uint64_t resolve_cgroup_id(const std::string& text) {
  if (!text.empty() && std::all_of(text.begin(), text.end(), ::isdigit)) return std::stoull(text);
  std::string path = text.rfind("/sys/fs/cgroup", 0) == 0 ? text : "/sys/fs/cgroup/" + text;
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0 || !S_ISDIR(st.st_mode))
    throw sdk::Error(LOUPE_ERR_NOT_FOUND,
                     "cgroup '" + text + "': " + path + " is not a cgroup v2 directory");
  return st.st_ino;
}

}  // namespace loupe::cpusample
