// SPDX-License-Identifier: Apache-2.0
#include "allocator_attacher.hpp"

#include <bpf/libbpf.h>

#include <cerrno>
#include <cstring>
#include <map>
#include <optional>

#include "loupe/sdk/plugin.hpp"
#include "loupe/sdk/uprobe.hpp"
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

AllocatorAttacher::AllocatorAttacher(const sdk::Host& host, memalloc_bpf* skel, std::string binary,
                                     int pid)
    : host_(host), skel_(skel), binary_(std::move(binary)), pid_(pid) {}

bool AllocatorAttacher::attach_one(const std::string& func, std::uint64_t offset,
                                   std::string& why) {
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
    LIBBPF_OPTS(bpf_uprobe_opts, o, .retprobe = ret);
    bpf_link* link = bpf_program__attach_uprobe_opts(prog, pid_, binary_.c_str(), offset, &o);
    int err = link ? 0 : errno;
    std::string probe = func + (ret ? ":return" : ":entry");
    host_.adopt_link(link, prog, probe, err, sdk::uprobe_target(binary_, offset, ret));
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
  // glibc's aligned_alloc is an alias of memalign (one address): two probes on one
  // address would trap twice per call and count one call under both names.
  std::map<std::uint64_t, std::string> attached_at;
  for (const auto& f : functions) {
    std::string why;
    std::optional<std::uint64_t> offset;
    try {
      offset = sdk::find_elf_function(binary_, f).file_offset;
    } catch (const sdk::Error& e) {
      why = e.what();
    }
    if (offset) {
      auto [it, fresh] = attached_at.emplace(*offset, f);
      if (!fresh) {
        host_.debug("memalloc: " + f + " is an alias of " + it->second + ": traced as " +
                    it->second);
        continue;
      }
      if (attach_one(f, *offset, why)) continue;
    }
    if (f == "malloc" || f == "free")
      throw sdk::Error(LOUPE_ERR_KERNEL, "cannot trace " + f + "(): " + why);
    host_.warn("memalloc: skipping " + f + "(): " + why);
    skipped.emplace_back(f, why);
  }
  return skipped;
}

}  // namespace loupe::memalloc
