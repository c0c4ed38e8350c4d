// SPDX-License-Identifier: Apache-2.0
//
// What the HTML report shows, gathered from records: per stack record name the stacks
// (root first) and their weight, the latest histogram of each (name, labels), and the
// latest value of each health check. Rendered as one JSON document the page reads.
#ifndef LOUPE_SINKS_HTML_REPORT_DATA_HPP
#define LOUPE_SINKS_HTML_REPORT_DATA_HPP

#include <cstdint>
#include <map>
#include <nlohmann/json.hpp>
#include <string>

#include "loupe/abi/records.h"

namespace loupe::sinks {

class ReportData {
 public:
  // `value_name`: which value weighs a stack (empty = each record's first).
  explicit ReportData(std::string value_name) : value_name_(std::move(value_name)) {}

  void add(const loupe_record& rec);
  nlohmann::json to_json(const std::string& title) const;

 private:
  struct Profile {
    std::string unit;
    std::string value_name;
    std::map<std::string, std::int64_t> stacks;  // frames joined by '\x1f', root first
  };
  std::string value_name_;
  std::map<std::string, Profile> profiles_;
  std::map<std::string, nlohmann::json> histograms_;  // name + labels -> histogram
  std::map<std::string, nlohmann::json> health_;      // name + component -> check
  std::uint64_t window_start_ = 0;
  std::uint64_t window_end_ = 0;
};

}  // namespace loupe::sinks

#endif  // LOUPE_SINKS_HTML_REPORT_DATA_HPP
