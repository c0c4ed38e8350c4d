// SPDX-License-Identifier: Apache-2.0
//
// The frames of stacks a BPF stack map (BPF_MAP_TYPE_STACK_TRACE) holds, by stack id:
// read and symbolized once per (process, id) and kept, so a profiler that reports the
// same stacks every interval pays the symbolizer once. Kernel stacks are shared by every
// process; user stacks are per process (the same addresses mean other code elsewhere).
//
// Frame strings belong to the host (valid until the plugin's destroy()).
// Not thread-safe: callers that warm stacks from a thread of their own hold their lock.
#ifndef LOUPE_SDK_STACK_MAP_HPP
#define LOUPE_SDK_STACK_MAP_HPP

#include <bpf/bpf.h>

#include <cstdint>
#include <iterator>
#include <map>
#include <set>
#include <string_view>
#include <utility>
#include <vector>

#include "loupe/sdk/host.hpp"

namespace loupe::sdk {

class StackMapFrames {
 public:
  using Frames = std::vector<loupe_frame>;

  // `max_depth`: the map's value size in addresses.
  StackMapFrames(const Host& host, int stacks_fd, std::uint32_t max_depth)
      : host_(host), fd_(stacks_fd), max_depth_(max_depth) {}

  // The user stack `id` of process `tgid`, leaf first; empty when id < 0 or it is gone.
  // A stack none of whose frames has a name is read again at the next call while its
  // process lives: it may be code the host has not seen mapped yet (a dlopen, a JIT's
  // perf map), and naming it once costs one symbolize call.
  const Frames& user(std::uint32_t tgid, std::int32_t id) {
    if (id < 0) return empty_;
    auto [it, inserted] = user_.try_emplace({tgid, id});
    if (inserted || unnamed_.count({tgid, id})) {
      if (auto ips = addresses(id); !ips.empty() || inserted)
        it->second = symbolized(tgid, LOUPE_FRAME_USER, ips);
      remember_unnamed(tgid, id, it->second);
    }
    return it->second;
  }
  // A user stack unwound in user space (unwind = "dwarf"), named now, while its process
  // lives, and kept under `id`: an id the stack map never hands out.
  const Frames& put_user(std::uint32_t tgid, std::int32_t id,
                         const std::vector<std::uint64_t>& ips) {
    Frames& f = user_[{tgid, id}];
    f = symbolized(tgid, LOUPE_FRAME_USER, ips);
    unnamed_.erase({tgid, id});
    return f;
  }
  // Leading frames of the tracing machinery that took the stack (the BPF program,
  // bpf_trace_run*, perf_trace_*, ...) are left out: they differ by hook flavour and say
  // nothing about the traced code.
  const Frames& kernel(std::int32_t id) {
    if (id < 0) return empty_;
    auto [it, inserted] = kernel_.try_emplace(id);
    if (inserted) {
      Frames all = symbolized(0, LOUPE_FRAME_KERNEL, addresses(id));
      std::size_t skip = 0;
      while (skip < all.size() && is_tracing_frame(all[skip].symbol)) ++skip;
      it->second.assign(all.begin() + static_cast<std::ptrdiff_t>(skip), all.end());
    }
    return it->second;
  }

  static bool is_tracing_frame(const char* symbol) {
    if (!symbol) return false;
    const std::string_view s(symbol);
    for (std::string_view p : {"bpf_prog_", "bpf_trace_run", "__bpf_trace_", "perf_trace_",
                               "trace_call_bpf", "__traceiter_", "bpf_get_stack"})
      if (s.substr(0, p.size()) == p) return true;
    return false;
  }

  // Raw addresses of stack `id` (leaf first); empty when the id is gone.
  std::vector<std::uint64_t> addresses(std::int32_t id) const {
    std::vector<std::uint64_t> ips(max_depth_, 0);
    if (id < 0 || bpf_map_lookup_elem(fd_, &id, ips.data()) != 0) return {};
    std::size_t n = 0;
    while (n < ips.size() && ips[n] != 0) ++n;
    ips.resize(n);
    return ips;
  }

  std::uint32_t max_depth() const { return max_depth_; }

  // Eviction (sdk/eviction.hpp): an exited process's stacks, and ids deleted from the map
  // (a later stack may take the id: its frames must be read again, not these).
  void forget_process(std::uint32_t tgid) {
    user_.erase(user_.lower_bound({tgid, INT32_MIN}), user_.upper_bound({tgid, INT32_MAX}));
    unnamed_.erase(unnamed_.lower_bound({tgid, INT32_MIN}),
                   unnamed_.upper_bound({tgid, INT32_MAX}));
  }
  void forget_ids(const std::set<std::int32_t>& ids) {
    if (ids.empty()) return;
    for (std::int32_t id : ids) kernel_.erase(id);
    for (auto it = user_.begin(); it != user_.end();)
      it = ids.count(it->first.second) ? user_.erase(it) : std::next(it);
  }
  std::size_t cached() const { return user_.size() + kernel_.size(); }

 private:
  Frames symbolized(std::uint32_t pid, loupe_frame_kind kind,
                    const std::vector<std::uint64_t>& ips) const {
    // A frame may stand for several (a compiled Java frame and the methods inlined in it).
    Frames out;
    if (!ips.empty())
      host_.symbolize_stack(pid, kind, ips.data(), static_cast<std::uint32_t>(ips.size()), &out);
    return out;
  }

  void remember_unnamed(std::uint32_t tgid, std::int32_t id, const Frames& f) {
    bool named = false, gone = false;
    for (const loupe_frame& fr : f) {
      named |= fr.symbol != nullptr;
      gone |= fr.resolution == LOUPE_UNRESOLVED_PROCESS_GONE;
    }
    if (named || gone || f.empty())
      unnamed_.erase({tgid, id});
    else
      unnamed_.insert({tgid, id});
  }

  Host host_;
  int fd_;
  std::uint32_t max_depth_;
  std::map<std::pair<std::uint32_t, std::int32_t>, Frames> user_;
  std::map<std::int32_t, Frames> kernel_;
  std::set<std::pair<std::uint32_t, std::int32_t>> unnamed_;  // user_ keys read again
  const Frames empty_;
};

}  // namespace loupe::sdk

#endif  // LOUPE_SDK_STACK_MAP_HPP
