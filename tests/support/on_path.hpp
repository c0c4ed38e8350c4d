// SPDX-License-Identifier: Apache-2.0
//
// The executable `tool` as the shell would find it on PATH ("" when absent): tests that
// need a program nobody here built (java, javac) skip with its name when it is missing.
#ifndef LOUPE_TESTS_SUPPORT_ON_PATH_HPP
#define LOUPE_TESTS_SUPPORT_ON_PATH_HPP

#include <unistd.h>

#include <cstdlib>
#include <string>

namespace loupe::test {

inline std::string on_path(const std::string& tool) {
  const char* path = std::getenv("PATH");
  const std::string dirs = path ? path : "/usr/bin:/bin";
  for (std::size_t at = 0; at <= dirs.size();) {
    std::size_t colon = dirs.find(':', at);
    if (colon == std::string::npos) colon = dirs.size();
    const std::string cand = dirs.substr(at, colon - at) + "/" + tool;
    if (::access(cand.c_str(), X_OK) == 0) return cand;
    at = colon + 1;
  }
  return "";
}

}  // namespace loupe::test

#endif  // LOUPE_TESTS_SUPPORT_ON_PATH_HPP
