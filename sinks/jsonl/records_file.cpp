// SPDX-License-Identifier: Apache-2.0
#include "records_file.hpp"

#include <filesystem>
#include <fstream>

namespace loupe::sinks {

RecordsFileError for_each_record(const std::string& where,
                                 const std::function<void(const nlohmann::json&)>& each) {
  std::filesystem::path p(where);
  if (std::filesystem::is_directory(p)) p /= "records.jsonl";
  RecordsFileError err;
  err.path = p.string();
  std::ifstream in(p);
  if (!in) {
    err.kind = RecordsFileError::kUnreadable;
    return err;
  }
  std::string line;
  std::size_t n = 0;
  while (std::getline(in, line)) {
    ++n;
    if (line.empty()) continue;
    nlohmann::json r;
    try {
      r = nlohmann::json::parse(line);
    } catch (const nlohmann::json::exception& e) {
      err.kind = RecordsFileError::kNotARecord;
      err.line = n;
      err.what = e.what();
      return err;
    }
    each(r);
  }
  return err;
}

}  // namespace loupe::sinks
