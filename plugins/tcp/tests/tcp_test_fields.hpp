// SPDX-License-Identifier: Apache-2.0
//
// What tcp's end-to-end tests read from a run: a figure the workload printed, and an event
// field that is absent when zero.
#ifndef LOUPE_TCP_TEST_FIELDS_HPP
#define LOUPE_TCP_TEST_FIELDS_HPP

#include <cstdint>
#include <nlohmann/json.hpp>
#include <regex>
#include <string>

namespace loupe::tcp::test {

// "name=123" in the workload's output; -1 when absent.
inline long figure(const std::string& output, const std::string& name) {
  std::smatch m;
  if (!std::regex_search(output, m, std::regex(name + "=([0-9]+)"))) return -1;
  return std::stol(m[1]);
}

inline std::uint64_t u(const nlohmann::json& fields, const char* name) {
  return fields.contains(name) ? fields[name].get<std::uint64_t>() : 0;
}

}  // namespace loupe::tcp::test

#endif  // LOUPE_TCP_TEST_FIELDS_HPP
