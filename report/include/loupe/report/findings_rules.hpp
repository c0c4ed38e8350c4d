// SPDX-License-Identifier: Apache-2.0
//
// The findings rules (README.md): statements of what stands out in final records, each
// with the numbers it rests on. A library rather than code inside the findings sink so
// that every sink that shows findings (findings.txt, the html report) says the same thing
// from the same records.
#ifndef LOUPE_REPORT_FINDINGS_RULES_HPP
#define LOUPE_REPORT_FINDINGS_RULES_HPP

#include <cstdint>
#include <map>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "loupe/abi/records.h"

namespace loupe::report {

struct FindingsOptions {
  double min_share = 0.5;
  double min_self_share = 0.2;
  double tail_ratio = 10;
  std::uint64_t min_count = 20;
};

class FindingsRules {
 public:
  explicit FindingsRules(FindingsOptions opt = {}) : opt_(opt) {}

  // Interval records are ignored: the rules judge a whole session.
  void add(const loupe_record& r);
  // The profilers' own findings (largest weight first), then dominant functions and hot
  // spots (by record), then long tails (largest ratio first), then losses.
  std::vector<std::string> statements() const;

  // The flat view of the stack record `who` ("plugin/name"), as the console's table: the
  // program's functions (report/program_view.hpp) by self share (innermost frame of the
  // view) and total share (anywhere in it), those that ran themselves, heaviest first. A
  // language frame reads "function (file)".
  struct FunctionShare {
    std::string function;
    double self = 0, total = 0;  // of the record's whole, 0..1
  };
  std::vector<FunctionShare> functions(const std::string& who, std::size_t limit) const;

 private:
  struct Stacks {
    std::string value_name, unit;
    double total = 0;
    std::map<std::string, double> under;        // function -> weight of the stacks that hold it
    std::map<std::string, double> depth;        // function -> weighted distance from the root
    std::set<std::string> user;                 // functions seen as user-space frames
    std::set<std::string> source;               // functions seen as language frames
    std::map<std::string, std::string> module;  // function -> its module's file name
    std::map<std::string, double> self;         // leaf function -> weight of its own stacks
  };
  // Too little behind a record to say anything: a count below min_count (a "100 % of 1").
  bool too_few(const Stacks& s) const;
  std::string dominant(const std::string& who, const Stacks& s) const;
  std::string hot_spot(const std::string& who, const Stacks& s, const std::string& dominant) const;

  FindingsOptions opt_;
  std::map<std::string, Stacks> stacks_;
  std::vector<std::pair<double, std::string>> said_;  // weight, "rule: statement"
  std::vector<std::pair<double, std::string>> tails_;
  std::vector<std::string> losses_;
};

}  // namespace loupe::report

#endif  // LOUPE_REPORT_FINDINGS_RULES_HPP
