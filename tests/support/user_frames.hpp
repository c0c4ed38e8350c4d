// SPDX-License-Identifier: Apache-2.0
//
// The user frames of one stack as the jsonl sink writes it (an event's "frames" or a stack
// record's), for tests that assert which function made a call: the leaf, the first frame
// outside libc (the caller of a libc wrapper), and whether the stack reaches its root.
#ifndef LOUPE_TESTS_USER_FRAMES_HPP
#define LOUPE_TESTS_USER_FRAMES_HPP

#include <map>
#include <nlohmann/json.hpp>
#include <regex>
#include <string>
#include <vector>

namespace loupe::test {

struct UserFrames {
  std::vector<std::string> symbols;  // leaf first; "?" where unresolved
  std::vector<std::string> modules;

  explicit UserFrames(const nlohmann::json& frames) {
    for (const auto& f : frames) {
      if (f.value("kind", "") != "user") continue;
      symbols.push_back(f.contains("symbol") && f["symbol"].is_string()
                            ? f["symbol"].get<std::string>()
                            : "?");
      modules.push_back(f.contains("module") && f["module"].is_string()
                            ? f["module"].get<std::string>()
                            : "");
    }
  }
  std::string leaf() const { return symbols.empty() ? "" : symbols.front(); }
  // The function that called into libc: the first frame whose module is not libc.
  std::string caller() const {
    for (std::size_t i = 0; i < symbols.size(); ++i)
      if (modules[i].find("libc.so") == std::string::npos) return symbols[i];
    return "";
  }
  bool reaches(const std::string& root) const {
    for (const auto& s : symbols)
      if (s == root) return true;
    return false;
  }
  std::string joined() const {
    std::string out;
    for (const auto& s : symbols) out += s + ";";
    return out;
  }
};

// The event records named `name` of a run (events are not final records).
inline std::vector<const nlohmann::json*> events(const std::vector<nlohmann::json>& records,
                                                 const std::string& name) {
  std::vector<const nlohmann::json*> out;
  for (const auto& r : records)
    if (r.value("kind", "") == "event" && r.value("name", "") == name) out.push_back(&r);
  return out;
}

// The `name=N` figures a workload printed ("pid=12 slow_read_site.read=20 ..."), by name.
inline std::map<std::string, long> workload_figures(const std::string& output) {
  std::map<std::string, long> out;
  static const std::regex kFigure("([A-Za-z_][A-Za-z_0-9.]*)=([0-9]+)");
  for (auto it = std::sregex_iterator(output.begin(), output.end(), kFigure);
       it != std::sregex_iterator(); ++it)
    out[(*it)[1]] = std::stol((*it)[2]);
  return out;
}

}  // namespace loupe::test

#endif  // LOUPE_TESTS_USER_FRAMES_HPP
