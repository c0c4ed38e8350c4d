// SPDX-License-Identifier: Apache-2.0
//
// Aggregates stack-sample records into folded stacks: per record name, identical
// root-to-leaf stacks add up their value.
#ifndef LOUPE_SINKS_FOLDED_STACK_FOLDER_HPP
#define LOUPE_SINKS_FOLDED_STACK_FOLDER_HPP

#include <cstdint>
#include <map>
#include <string>

#include "loupe/abi/records.h"

namespace loupe::sinks {

struct FoldOptions {
  std::string value_name;     // empty = each record's first value
  bool include_comm = false;  // root frame = the record's "comm" label
};

class StackFolder {
 public:
  explicit StackFolder(FoldOptions opts) : opts_(std::move(opts)) {}

  // Adds one record. Returns false when it is not a stack sample or carries no value
  // of the configured name (such records are counted, not folded).
  bool add(const loupe_record& rec);

  // record name -> (folded stack -> summed value), sorted for reproducible files.
  using Stacks = std::map<std::string, std::int64_t>;
  using ByName = std::map<std::string, Stacks>;
  const ByName& by_name() const { return by_name_; }
  void clear() { by_name_.clear(); }
  std::uint64_t skipped() const { return skipped_; }

  // The lines of one record name ("a;b;c 42\n" ...), positive values only.
  static std::string render(const Stacks& stacks, const std::string& root_prefix = {});

 private:
  FoldOptions opts_;
  ByName by_name_;
  std::uint64_t skipped_ = 0;
};

}  // namespace loupe::sinks

#endif  // LOUPE_SINKS_FOLDED_STACK_FOLDER_HPP
