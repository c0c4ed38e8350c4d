// SPDX-License-Identifier: Apache-2.0
//
// The table of runtimes: the one place that names them. A new runtime is a folder here,
// a BPF step header (bpf/include/loupe/unwind_<name>.bpf.h), a LOUPE_RUNTIME_* value
// (loupe/unwind.h) and a row below; its profile keys ([runtimes.<key>]) are the row's, so
// the profile's validator and `loupe` never name it either.
#include "hotspot/hotspot_frames.hpp"
#include "python/python_frames.hpp"
#include "session/runtime.hpp"

namespace loupe {

namespace {

const loupe_config_key kHotSpotKeys[] = {
    {"perf_map", LOUPE_CFG_BOOL, 0, "false",
     "also ask the target's HotSpot JVMs (JDK 17+) for their perf map through their attach "
     "listener (a signal and a socket); off: Java frames are read from the VM's own "
     "structures, without attach"},
};

bool bool_key(const RuntimeConfig& c, const char* key) {
  if (!c.values) return false;
  auto it = c.values->values.find(key);
  return it != c.values->values.end() && it->second.b;
}

}  // namespace

const std::vector<RuntimeRow>& runtime_table() {
  static const std::vector<RuntimeRow> rows = {
      {"python", nullptr, 0,
       [](const RuntimeConfig& c) -> std::unique_ptr<Runtime> {
         return std::make_unique<PythonFrames>(c.proc_root);
       }},
      {"hotspot", kHotSpotKeys, static_cast<std::uint32_t>(std::size(kHotSpotKeys)),
       [](const RuntimeConfig& c) -> std::unique_ptr<Runtime> {
         return std::make_unique<HotSpotFrames>(c.proc_root, bool_key(c, "perf_map"));
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
