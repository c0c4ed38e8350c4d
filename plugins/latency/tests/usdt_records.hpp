// SPDX-License-Identifier: Apache-2.0
//
// Reading a USDT run's final records back (the latency USDT end-to-end tests share it).
#ifndef LOUPE_LATENCY_TESTS_USDT_RECORDS_HPP
#define LOUPE_LATENCY_TESTS_USDT_RECORDS_HPP

#include <map>
#include <nlohmann/json.hpp>
#include <string>

#include "cli_run.hpp"

namespace loupe::test {

// Final records of `kind`/`name` for target `target`, by the value of label `label`.
inline std::map<std::string, const nlohmann::json*> by_label(const RunResult& r,
                                                             const std::string& kind,
                                                             const std::string& name,
                                                             const std::string& target,
                                                             const std::string& label) {
  std::map<std::string, const nlohmann::json*> out;
  for (const auto& rec : r.records)
    if (rec.value("kind", "") == kind && rec.value("name", "") == name &&
        rec.value("is_final", false) && rec["labels"].value("target", "") == target &&
        rec["labels"].contains(label))
      out[rec["labels"][label].get<std::string>()] = &rec;
  return out;
}

// The target's own final metric `name` (no label beyond target and mechanism); -1 if none.
inline double total(const RunResult& r, const std::string& name, const std::string& target) {
  for (const auto& rec : r.records)
    if (rec.value("kind", "") == "metric" && rec.value("name", "") == name &&
        rec.value("is_final", false) && rec["labels"].value("target", "") == target &&
        rec["labels"].size() == 2)
      return rec["metric"]["value"].get<double>();
  return -1;
}

// The target's final health record `name`, or nullptr.
inline const nlohmann::json* final_health(const RunResult& r, const std::string& name,
                                          const std::string& target) {
  for (const auto& rec : r.records)
    if (rec.value("kind", "") == "health" && rec.value("name", "") == name &&
        rec.value("is_final", false) && rec["labels"].value("target", "") == target)
      return &rec;
  return nullptr;
}

}  // namespace loupe::test

#endif  // LOUPE_LATENCY_TESTS_USDT_RECORDS_HPP
