// SPDX-License-Identifier: Apache-2.0
//
// What the HTML report shows, gathered from records: per producer and stack record name
// the stacks (root first) and their weight, the latest histogram of each (name, labels),
// the latest value of each health check, and the findings rules' statements. Rendered as
// one JSON document the page reads; given the same data of a base run, each stack also
// carries its weight there, for a differential flame graph.
#ifndef LOUPE_SINKS_HTML_REPORT_DATA_HPP
#define LOUPE_SINKS_HTML_REPORT_DATA_HPP

#include <cstdint>
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <utility>
#include <vector>

#include "loupe/abi/records.h"
#include "loupe/report/findings_rules.hpp"

namespace loupe::sinks {

class ReportData {
 public:
  // `value_name`: which value weighs a stack (empty = each record's first).
  explicit ReportData(std::string value_name) : value_name_(std::move(value_name)) {}

  void add(const loupe_record& rec);
  // `profilers`: the profile's instances in the order the user wrote them; `base`: the
  // same data of an earlier run (nullptr: no comparison), named by `base_label`.
  nlohmann::json to_json(const std::string& title, const std::vector<std::string>& profilers,
                         const ReportData* base, const std::string& base_label) const;

 private:
  struct Profile {
    std::string unit;
    std::string value_name;
    std::map<std::string, std::int64_t> stacks;  // frames joined by '\x1f', root first
  };
  std::string value_name_;
  std::map<std::pair<std::string, std::string>, Profile> profiles_;  // (plugin, name)
  report::FindingsRules findings_;
  std::map<std::string, nlohmann::json> histograms_;  // name + labels -> histogram
  std::map<std::string, nlohmann::json> health_;      // name + component -> check
  std::uint64_t window_start_ = 0;
  std::uint64_t window_end_ = 0;
};

}  // namespace loupe::sinks

#endif  // LOUPE_SINKS_HTML_REPORT_DATA_HPP
