// SPDX-License-Identifier: Apache-2.0
#include "stack_frames.hpp"

#include <fstream>
#include <sstream>
#include <string>

#include "loupe/unwind.h"

namespace loupe::memalloc {

// One read serves both maps: a stack map's value and the unwinder's stack are alike.
static_assert(MA_STACK_DEPTH == LOUPE_UNWIND_MAX_DEPTH);

void StackFrames::append(std::uint32_t pid, loupe_frame_kind kind, std::int32_t id,
                         std::vector<loupe_frame>& out) const {
  auto u = kind == LOUPE_FRAME_USER ? unwound_.find({pid, id}) : unwound_.end();
  auto ips = u != unwound_.end()
                 ? u->second
                 : (kind == LOUPE_FRAME_USER ? user_map_ : kernel_map_).addresses(id);
  if (ips.empty()) return;
  std::vector<loupe_frame> f(ips.size());
  if (host_.symbolize(pid, kind, ips.data(), static_cast<std::uint32_t>(ips.size()), f.data()) !=
      LOUPE_OK) {
    // Keep the addresses: an unsymbolized stack still tells sites apart.
    for (std::size_t i = 0; i < ips.size(); ++i)
      f[i] = loupe_frame{ips[i],
                         nullptr,
                         nullptr,
                         ips[i],
                         static_cast<std::uint32_t>(kind),
                         LOUPE_UNRESOLVED_NOT_ATTEMPTED};
  }
  std::size_t skip = 0;
  if (kind == LOUPE_FRAME_KERNEL)
    while (skip < f.size() && sdk::StackMapFrames::is_tracing_frame(f[skip].symbol)) ++skip;
  out.insert(out.end(), f.begin() + static_cast<std::ptrdiff_t>(skip), f.end());
}

const std::vector<loupe_frame>& StackFrames::frames(const ma_stack_key& key) {
  std::lock_guard lock(mu_);
  auto k = std::make_tuple(key.tgid, key.user_stack_id, key.kernel_stack_id);
  auto it = cache_.find(k);
  if (it != cache_.end()) return it->second;
  std::vector<loupe_frame> out;
  append(0, LOUPE_FRAME_KERNEL, key.kernel_stack_id, out);
  append(key.tgid, LOUPE_FRAME_USER, key.user_stack_id, out);
  return cache_.emplace(k, std::move(out)).first->second;
}

void StackFrames::put_user_stack(std::uint32_t tgid, std::int32_t id,
                                 const std::vector<std::uint64_t>& addrs) {
  std::vector<loupe_frame> out;
  {
    std::lock_guard lock(mu_);
    unwound_[{tgid, id}] = addrs;
  }
  // Named now: the frames are cached for frames() of this site.
  ma_stack_key key{};
  key.tgid = tgid;
  key.user_stack_id = id;
  key.kernel_stack_id = -1;
  frames(key);
}

void StackFrames::warm(std::uint32_t tgid) {
  // One address in every executable file mapping: the symbolizer then has every module's
  // table, not only those of one stack (a walk through a library built without frame
  // pointers stops early), and keeps them after the process exits.
  std::vector<std::uint64_t> addrs;
  std::ifstream maps("/proc/" + std::to_string(tgid) + "/maps");
  std::string line;
  while (std::getline(maps, line)) {
    std::istringstream in(line);
    std::string range, perms;
    in >> range >> perms;
    if (perms.size() < 3 || perms[2] != 'x' || line.find('/') == std::string::npos) continue;
    addrs.push_back(std::stoull(range.substr(0, range.find('-')), nullptr, 16));
  }
  if (addrs.empty()) return;  // gone, or no file mappings yet
  {
    std::lock_guard lock(mu_);
    auto& last = warmed_[tgid];
    if (last == addrs) return;
    last = addrs;
  }
  // The mappings changed: an exec (a held `loupe run -- cmd` child was warmed as loupe's
  // image) or a dlopen. Drop what was cached and read the new address space.
  host_.invalidate_symbols(tgid);
  std::vector<loupe_frame> out(addrs.size());
  host_.symbolize(tgid, LOUPE_FRAME_USER, addrs.data(), static_cast<std::uint32_t>(addrs.size()),
                  out.data());
}

}  // namespace loupe::memalloc
