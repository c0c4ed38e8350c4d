// SPDX-License-Identifier: Apache-2.0
//
// The table of runtimes: the one place that names them. A new runtime is a folder here,
// a BPF step header (bpf/include/loupe/unwind_<name>.bpf.h), a LOUPE_RUNTIME_* value
// (loupe/unwind.h), a row below and, when it takes profile keys ([runtimes.<key>]), a row
// in runtime_keys.cpp (the profile's validator reads that table alone).
#include "hotspot/hotspot_frames.hpp"
#include "python/python_frames.hpp"
#include "runtimes/runtime.hpp"
#include "v8/v8_frames.hpp"

namespace loupe {

namespace {

bool bool_key(const RuntimeConfig& c, const char* key) {
  if (!c.values) return false;
  auto it = c.values->values.find(key);
  return it != c.values->values.end() && it->second.b;
}

}  // namespace

const std::vector<RuntimeRow>& runtime_table() {
  static const std::vector<RuntimeRow> rows = {
      {"python",
       [](const RuntimeConfig& c) -> std::unique_ptr<Runtime> {
         return std::make_unique<PythonFrames>(c.proc_root);
       }},
      {"hotspot",
       [](const RuntimeConfig& c) -> std::unique_ptr<Runtime> {
         return std::make_unique<HotSpotFrames>(c.proc_root, bool_key(c, "perf_map"));
       }},
      {"v8",
       [](const RuntimeConfig& c) -> std::unique_ptr<Runtime> {
         // Made in code, without the profile's tables: at its default, on.
         return std::make_unique<V8Frames>(c.proc_root, !c.values || bool_key(c, "frames"));
       }},
  };
  return rows;
}

std::vector<std::unique_ptr<Runtime>> make_runtimes(
    const std::string& proc_root,
    const std::map<std::string, std::shared_ptr<const loupe_config>>& values) {
  std::vector<std::unique_ptr<Runtime>> r;
  for (const auto& row : runtime_table()) {
    const auto v = values.find(row.key);
    r.push_back(row.make({proc_root, v == values.end() ? nullptr : v->second.get()}));
  }
  return r;
}

}  // namespace loupe
