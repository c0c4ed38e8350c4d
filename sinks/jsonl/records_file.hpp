// SPDX-License-Identifier: Apache-2.0
//
// Reading a run's records back: the jsonl sink's records.jsonl (docs/records.md), given
// as the file or as the output directory that holds it. One reader for every tool that
// compares or replays runs (`loupe diff`, the html report's base run), so they agree on
// what a records file is and on how a bad one is reported.
#ifndef LOUPE_SINKS_RECORDS_FILE_HPP
#define LOUPE_SINKS_RECORDS_FILE_HPP

#include <cstddef>
#include <functional>
#include <nlohmann/json.hpp>
#include <string>

namespace loupe::sinks {

struct RecordsFileError {
  enum Kind { kNone, kUnreadable, kNotARecord } kind = kNone;
  std::string path;      // the file that was read (records.jsonl inside a directory)
  std::size_t line = 0;  // kNotARecord: 1-based
  std::string what;      // kNotARecord: the parser's words
  explicit operator bool() const { return kind != kNone; }
};

// Calls `each` with every record, in file order; blank lines are skipped. Stops at the
// first line that is not JSON and says where.
RecordsFileError for_each_record(const std::string& where,
                                 const std::function<void(const nlohmann::json&)>& each);

}  // namespace loupe::sinks

#endif  // LOUPE_SINKS_RECORDS_FILE_HPP
