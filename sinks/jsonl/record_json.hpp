// SPDX-License-Identifier: Apache-2.0
#ifndef LOUPE_SINKS_JSONL_RECORD_JSON_HPP
#define LOUPE_SINKS_JSONL_RECORD_JSON_HPP

#include <nlohmann/json.hpp>
#include <string>

#include "loupe/abi/records.h"

namespace loupe::sinks {

// The versioned JSON rendering of one record (docs/records.md). Adding a field keeps the
// version; removing or renaming one bumps it.
inline constexpr const char* kRecordSchema = "loupe.record/1";

// Ordered so a line reads top-down: identity first, payload last.
nlohmann::ordered_json record_to_json(const loupe_record& rec);

// One line without the trailing newline. Invalid UTF-8 in strings (a comm, a symbol) is
// replaced rather than failing the whole record.
std::string record_to_line(const loupe_record& rec);

}  // namespace loupe::sinks

#endif
