// SPDX-License-Identifier: Apache-2.0
#include "loupe/report/records_file.hpp"

#include <filesystem>
#include <fstream>

namespace loupe::report {

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
    try {
      each(r);
    } catch (const nlohmann::json::exception& e) {
      err.kind = RecordsFileError::kNotARecord;
      err.line = n;
      err.what = e.what();
      return err;
    }
  }
  return err;
}

std::string text_field(const nlohmann::json& obj, const char* key, const std::string& fallback) {
  if (!obj.is_object()) return fallback;
  auto it = obj.find(key);
  return it != obj.end() && it->is_string() ? it->get<std::string>() : fallback;
}

double number_field(const nlohmann::json& obj, const char* key, double fallback) {
  if (!obj.is_object()) return fallback;
  auto it = obj.find(key);
  return it != obj.end() && it->is_number() ? it->get<double>() : fallback;
}

loupe_frame frame_from_json(const nlohmann::json& f) {
  auto text = [&](const char* key) -> const char* {
    auto it = f.find(key);
    return it != f.end() && it->is_string() ? it->get_ref<const std::string&>().c_str() : nullptr;
  };
  auto u64 = [&](const char* key) -> std::uint64_t {
    auto it = f.find(key);
    return it != f.end() && it->is_number_unsigned() ? it->get<std::uint64_t>() : 0;
  };
  loupe_frame lf{};
  if (!f.is_object()) return lf;
  lf.address = u64("address");
  lf.symbol = text("symbol");
  lf.module = text("module");
  lf.offset = u64("offset");
  const std::string kind = text_field(f, "kind", "user");
  lf.kind = kind == "kernel"   ? LOUPE_FRAME_KERNEL
            : kind == "jit"    ? LOUPE_FRAME_JIT
            : kind == "python" ? LOUPE_FRAME_PYTHON
            : kind == "java"   ? LOUPE_FRAME_JAVA
            : kind == "js"     ? LOUPE_FRAME_JS
                               : LOUPE_FRAME_USER;
  return lf;
}

}  // namespace loupe::report
