// SPDX-License-Identifier: Apache-2.0
//
// The table of runtimes: the one place that names them. A new runtime is a folder here,
// a BPF step header (bpf/include/loupe/unwind_<name>.bpf.h), a LOUPE_RUNTIME_* value
// (loupe/unwind.h) and a row below.
#include "hotspot/hotspot_frames.hpp"
#include "python/python_frames.hpp"
#include "session/runtime.hpp"

namespace loupe {

std::vector<std::unique_ptr<Runtime>> make_runtimes(const RuntimeOptions& opts) {
  std::vector<std::unique_ptr<Runtime>> r;
  r.push_back(std::make_unique<PythonFrames>(opts.proc_root));
  r.push_back(std::make_unique<HotSpotFrames>(opts.proc_root, opts.jvm_perf_map));
  return r;
}

}  // namespace loupe
