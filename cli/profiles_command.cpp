// SPDX-License-Identifier: Apache-2.0
// `loupe profiles [--json]`, and the one place a command's PROFILE argument becomes a file.
#include <fmt/format.h>

#include <algorithm>
#include <iostream>
#include <nlohmann/json.hpp>

#include "commands.hpp"
#include "loupe/exit_code.hpp"
#include "loupe/profile_catalog.hpp"

namespace loupe::cli {

std::optional<int> resolve_profile_arg(std::string& arg) {
  try {
    arg = ProfileCatalog().resolve(arg).string();
    return std::nullopt;
  } catch (const ProfileNotFound& e) {
    // The code of a profile that cannot be read (`loupe run nope.toml`): a misspelt name is
    // the same mistake as a misspelt path.
    std::cerr << "loupe: error: " << e.what() << "\n";
    return static_cast<int>(ExitCode::kProfile);
  }
}

int cmd_profiles(bool as_json) {
  ProfileCatalog catalog;
  auto entries = catalog.list();
  if (as_json) {
    using nlohmann::json;
    json profiles = json::array(), dirs = json::array();
    for (const auto& e : entries) {
      json shadowed = json::array();
      for (const auto& d : e.shadowed) shadowed.push_back(d.path.string());
      profiles.push_back({{"name", e.name},
                          {"path", e.path.string()},
                          {"origin", e.origin},
                          {"summary", e.summary},
                          {"shadows", shadowed}});
    }
    for (const auto& d : catalog.search_dirs())
      dirs.push_back({{"path", d.path.string()}, {"origin", d.origin}});
    std::cout << json{{"profiles", profiles}, {"search_dirs", dirs}}.dump(2) << "\n";
    return 0;
  }
  std::size_t width = 4;
  for (const auto& e : entries) width = std::max(width, e.name.size());
  fmt::print("{:<{}}  {:<18}  {}\n", "NAME", width, "FROM", "WHAT");
  for (const auto& e : entries) {
    std::string summary = e.summary;
    // A copy edited in ~/.config hides the installed one: say so, or its edits look lost.
    for (const auto& d : e.shadowed) summary += fmt::format(" [shadows {}]", d.origin);
    fmt::print("{:<{}}  {:<18}  {}\n", e.name, width, e.origin, summary);
  }
  fmt::print("\nsearched in this order (the first NAME.toml wins):\n");
  for (const auto& d : catalog.search_dirs()) {
    std::error_code ec;
    fmt::print("  {:<18}  {}{}\n", d.origin, d.path.string(),
               std::filesystem::is_directory(d.path, ec) ? "" : " (absent)");
  }
  return 0;
}

}  // namespace loupe::cli
