// SPDX-License-Identifier: Apache-2.0
#include "base_run.hpp"

#include <nlohmann/json.hpp>
#include <vector>

#include "loupe/report/records_file.hpp"
#include "loupe/sdk/plugin.hpp"

namespace loupe::sinks {
namespace {

using nlohmann::json;

const char* str_or_null(const json& o, const char* key) {
  auto it = o.find(key);
  return it != o.end() && it->is_string() ? it->get_ref<const std::string&>().c_str() : nullptr;
}

}  // namespace

std::string load_base_run(const std::string& where, ReportData& into) {
  std::size_t stacks = 0;
  const report::RecordsFileError err = report::for_each_record(where, [&](const json& r) {
    if (!r.is_object() || report::text_field(r, "kind") != "stack" || !r.value("is_final", false) ||
        !r.contains("stack") || !r["stack"].is_object())
      return;
    const json& s = r["stack"];
    // The records point into `r` (not into copies: json::value() returns one), which
    // outlives add(); add() copies what it keeps.
    static const json kNone = json::array();
    const json& fs = s.contains("frames") && s["frames"].is_array() ? s["frames"] : kNone;
    const json& vs = s.contains("values") && s["values"].is_array() ? s["values"] : kNone;
    std::vector<loupe_frame> frames;
    for (const auto& f : fs) frames.push_back(report::frame_from_json(f));
    std::vector<loupe_value> values;
    for (const auto& v : vs)
      values.push_back(
          {str_or_null(v, "name"), str_or_null(v, "unit"), v.value("value", std::int64_t{0})});
    loupe_stack_sample st{};
    st.size = sizeof(st);
    st.frames = frames.data();
    st.n_frames = static_cast<std::uint32_t>(frames.size());
    st.values = values.data();
    st.n_values = static_cast<std::uint32_t>(values.size());
    loupe_record rec{};
    rec.size = sizeof(rec);
    rec.kind = LOUPE_RECORD_STACK_SAMPLE;
    rec.name = str_or_null(r, "name");
    rec.plugin = str_or_null(r, "plugin");
    rec.is_final = 1;
    rec.stack = &st;
    into.add(rec);
    ++stacks;
  });
  if (err.kind == report::RecordsFileError::kUnreadable)
    throw sdk::Error(LOUPE_ERR_INVALID_ARG,
                     "html: base '" + err.path +
                         "' cannot be read (a records.jsonl, or the output directory of a run "
                         "with the jsonl sink)");
  if (err)
    throw sdk::Error(LOUPE_ERR_INVALID_ARG,
                     "html: base " + err.path + ":" + std::to_string(err.line) + ": not a record");
  if (stacks == 0)
    throw sdk::Error(LOUPE_ERR_INVALID_ARG,
                     "html: base " + err.path +
                         " holds no final stack record (did that run have a stack profiler "
                         "and the jsonl sink, and did it end?)");
  return err.path;
}

}  // namespace loupe::sinks
