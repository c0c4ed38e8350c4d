// SPDX-License-Identifier: Apache-2.0
//
// Reading a run's records back: the jsonl sink's records.jsonl (docs/records.md), given
// as the file or as the output directory that holds it. One reader for every tool that
// compares or replays runs (`loupe diff`, the html report's base run), so they agree on
// what a records file is and on how a bad one is reported.
#ifndef LOUPE_REPORT_RECORDS_FILE_HPP
#define LOUPE_REPORT_RECORDS_FILE_HPP

#include <cstddef>
#include <functional>
#include <nlohmann/json.hpp>
#include <string>

#include "loupe/abi/records.h"

namespace loupe::report {

struct RecordsFileError {
  enum Kind { kNone, kUnreadable, kNotARecord } kind = kNone;
  std::string path;      // the file that was read (records.jsonl inside a directory)
  std::size_t line = 0;  // kNotARecord: 1-based
  std::string what;      // kNotARecord: the parser's words
  explicit operator bool() const { return kind != kNone; }
};

// Calls `each` with every record, in file order; blank lines are skipped. Stops at the
// first line that is not JSON, or whose record `each` could not read (a JSON type error
// thrown from it), and says where.
RecordsFileError for_each_record(const std::string& where,
                                 const std::function<void(const nlohmann::json&)>& each);

// Fields read without throwing. A record holds null where a value is unknown (a frame's
// symbol or module, a unit, a NaN figure): these return `fallback` for null, a missing key
// or another type.
std::string text_field(const nlohmann::json& obj, const char* key,
                       const std::string& fallback = "");
double number_field(const nlohmann::json& obj, const char* key, double fallback = 0);

// One frame of a stack or event record as the ABI's loupe_frame, so that it is named
// exactly as the live sinks name it. `symbol` and `module` point into `f` (NULL where the
// record has null) and are valid as long as `f`.
loupe_frame frame_from_json(const nlohmann::json& f);

}  // namespace loupe::report

#endif  // LOUPE_REPORT_RECORDS_FILE_HPP
