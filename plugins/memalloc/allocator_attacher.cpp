// SPDX-License-Identifier: Apache-2.0
#include "allocator_attacher.hpp"

#include <bpf/libbpf.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <sstream>

#include "loupe/sdk/plugin.hpp"
#include "memalloc.h"
#include "memalloc.skel.h"

namespace loupe::memalloc {
namespace {

bpf_program* entry_prog(memalloc_bpf* s, const std::string& f) {
  auto& p = s->progs;
  if (f == "malloc") return p.ma_malloc;
  if (f == "calloc") return p.ma_calloc;
  if (f == "realloc") return p.ma_realloc;
  if (f == "posix_memalign") return p.ma_posix_memalign;
  if (f == "aligned_alloc") return p.ma_aligned_alloc;
  if (f == "memalign") return p.ma_memalign;
  if (f == "valloc") return p.ma_valloc;
  if (f == "pvalloc") return p.ma_pvalloc;
  if (f == "free") return p.ma_free;
  return nullptr;
}

}  // namespace

const std::vector<std::string>& allocator_functions() {
  static const std::vector<std::string> kFuncs = {"malloc",         "calloc",        "realloc",
                                                  "posix_memalign", "aligned_alloc", "memalign",
                                                  "valloc",         "pvalloc",       "free"};
  return kFuncs;
}

std::string libc_of(int pid) {
  std::ifstream maps(pid ? "/proc/" + std::to_string(pid) + "/maps" : "/proc/self/maps");
  std::string line;
  while (std::getline(maps, line)) {
    auto slash = line.find('/');
    if (slash == std::string::npos) continue;
    std::string path = line.substr(slash);
    auto base = path.substr(path.rfind('/') + 1);
    if (base.rfind("libc.so", 0) == 0 || base.rfind("libc-", 0) == 0) return path;
  }
  return {};
}

AllocatorAttacher::AllocatorAttacher(const sdk::Host& host, memalloc_bpf* skel, std::string binary,
                                     int pid)
    : host_(host), skel_(skel), binary_(std::move(binary)), pid_(pid) {}

bool AllocatorAttacher::attach_one(const std::string& func, std::string& why) {
  bpf_program* entry = entry_prog(skel_, func);
  if (!entry) {
    why = "not an allocator function this plugin knows";
    return false;
  }
  // The return half first: a return without its entry is counted and harmless, an entry
  // whose return was never attached would leave the thread's call pending.
  bool paired = func != "free";
  for (bool ret : {true, false}) {
    if (ret && !paired) continue;
    bpf_program* prog = ret ? skel_->progs.ma_alloc_exit : entry;
    LIBBPF_OPTS(bpf_uprobe_opts, o, .retprobe = ret, .func_name = func.c_str());
    bpf_link* link = bpf_program__attach_uprobe_opts(prog, pid_, binary_.c_str(), 0, &o);
    int err = link ? 0 : errno;
    std::string probe = func + (ret ? ":return" : ":entry");
    host_.adopt_link(link, prog, probe, err);
    if (!link) {
      why = binary_ + ": " + probe + ": " + std::strerror(err) + " (errno " + std::to_string(err) +
            ")";
      return false;
    }
  }
  return true;
}

std::vector<std::pair<std::string, std::string>> AllocatorAttacher::attach(
    const std::vector<std::string>& functions) {
  std::vector<std::pair<std::string, std::string>> skipped;
  for (const auto& f : functions) {
    std::string why;
    if (attach_one(f, why)) continue;
    if (f == "malloc" || f == "free")
      throw sdk::Error(LOUPE_ERR_KERNEL, "cannot trace " + f + "(): " + why);
    host_.warn("memalloc: skipping " + f + "(): " + why);
    skipped.emplace_back(f, why);
  }
  return skipped;
}

}  // namespace loupe::memalloc
