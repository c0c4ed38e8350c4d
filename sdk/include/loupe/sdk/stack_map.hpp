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
#include <bpf/libbpf.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <iterator>
#include <map>
#include <set>
#include <string_view>
#include <utility>
#include <vector>

#include "loupe/sdk/host.hpp"

namespace loupe::sdk {

// perf's bound on a stack (kernel.perf_event_max_stack's default): the depth of a stack
// map that holds user stacks (unwind = "fp").
inline constexpr std::uint32_t kStackMapDepth = 127;

// A stack map that holds kernel stacks only (user stacks in the unwinder's store) needs
// far fewer frames: a kernel stack is a syscall and an interrupt deep. The deepest of 20 s
// of every CPU sample and every switch on a 2-CPU host running a full build and test run
// were 17 and 23 frames (bpftrace, kstack 127). Half of perf's bound halves the map (8
// instead of 16 MiB for 16384 stacks); a stack that fills it is counted in the profiler's
// truncated_stacks row, never cut silently.
inline constexpr loupe_config_key kKernelStackDepthKey = {
    "kernel_stack_depth",
    LOUPE_CFG_INT,
    0,
    "64",
    "frames kept of a kernel stack when user stacks are unwound by tables (a stack map of "
    "kernel stacks only is sized for this many; deeper ones are counted as truncated)",
    8,
    kStackMapDepth};

// Sizes a stack map (BPF_MAP_TYPE_STACK_TRACE) of an opened object for `entries` stacks of
// `depth` frames each (before load).
inline void size_stack_map(bpf_map* map, std::uint32_t entries, std::uint32_t depth) {
  bpf_map__set_max_entries(map, entries);
  bpf_map__set_value_size(map, depth * static_cast<std::uint32_t>(sizeof(std::uint64_t)));
}

// When a stack none of whose frames had a name is symbolized again: soon after it was
// first seen (the code it ran may be mapped or named a moment later: a dlopen, a JIT's
// perf map), then at doubling intervals up to kLongest. A stack that stays unnamed (an
// interpreter's or a JIT's frames no map names) was symbolized again at every warm-up
// and every report, each time a stack map read and the perf map and jitdump stats: under
// two JVMs, 1,600 syscalls a second of the cpusample warmer alone.
class RenameSchedule {
 public:
  using Clock = std::chrono::steady_clock;
  static constexpr Clock::duration kFirst = std::chrono::milliseconds(250);
  static constexpr Clock::duration kLongest = std::chrono::seconds(8);

  // Tried once at `now` and still unnamed.
  void tried(Clock::time_point now) {
    Clock::duration wait = kFirst;
    for (std::uint32_t i = 0; i < tries_ && wait < kLongest; ++i) wait *= 2;
    next_ = now + std::min(wait, kLongest);
    ++tries_;
  }
  bool due(Clock::time_point now) const { return now >= next_; }
  // The last report names what it can: everything is due.
  void now_due() { next_ = Clock::time_point{}; }
  std::uint32_t tries() const { return tries_; }

 private:
  std::uint32_t tries_ = 0;
  Clock::time_point next_{};
};

class StackMapFrames {
 public:
  using Frames = std::vector<loupe_frame>;

  // `max_depth`: the map's value size in addresses, as the map says (a map sized by
  // size_stack_map()); the argument where it cannot.
  StackMapFrames(const Host& host, int stacks_fd, std::uint32_t max_depth)
      : host_(host), fd_(stacks_fd), max_depth_(depth_of(stacks_fd, max_depth)) {}

  // The user stack `id` of process `tgid`, leaf first; empty when id < 0 or it is gone.
  // A stack none of whose frames has a name is read again while its process lives, on
  // RenameSchedule's: it may be code the host has not seen mapped yet (a dlopen, a JIT's
  // perf map).
  const Frames& user(std::uint32_t tgid, std::int32_t id,
                     RenameSchedule::Clock::time_point now = RenameSchedule::Clock::now()) {
    if (id < 0) return empty_;
    auto [it, inserted] = user_.try_emplace({tgid, id});
    auto again = inserted ? unnamed_.end() : unnamed_.find({tgid, id});
    if (inserted || (again != unnamed_.end() && again->second.due(now))) {
      if (auto ips = addresses(id); !ips.empty() || inserted) {
        it->second = symbolized(tgid, LOUPE_FRAME_USER, ips);
        if (ips.size() >= max_depth_) user_cut_.insert({tgid, id});
      }
      remember_unnamed(tgid, id, it->second, now);
    }
    return it->second;
  }
  // Before the final report: every unnamed stack is named again, whatever its schedule.
  void rename_unnamed_now() {
    for (auto& [key, schedule] : unnamed_) schedule.now_due();
  }
  // Stacks read again later because none of their frames had a name (a test's view).
  std::size_t unnamed() const { return unnamed_.size(); }
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
      const std::vector<std::uint64_t> ips = addresses(id);
      if (ips.size() >= max_depth_) kernel_cut_.insert(id);
      Frames all = symbolized(0, LOUPE_FRAME_KERNEL, ips);
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

  // Whether a stack read before filled the map's value: its root may be cut off.
  bool kernel_cut(std::int32_t id) const { return kernel_cut_.count(id) > 0; }
  bool user_cut(std::uint32_t tgid, std::int32_t id) const {
    return user_cut_.count({tgid, id}) > 0;
  }

  // Eviction (sdk/eviction.hpp): an exited process's stacks, and ids deleted from the map
  // (a later stack may take the id: its frames must be read again, not these).
  void forget_process(std::uint32_t tgid) {
    user_.erase(user_.lower_bound({tgid, INT32_MIN}), user_.upper_bound({tgid, INT32_MAX}));
    unnamed_.erase(unnamed_.lower_bound({tgid, INT32_MIN}),
                   unnamed_.upper_bound({tgid, INT32_MAX}));
    user_cut_.erase(user_cut_.lower_bound({tgid, INT32_MIN}),
                    user_cut_.upper_bound({tgid, INT32_MAX}));
  }
  void forget_ids(const std::set<std::int32_t>& ids) {
    if (ids.empty()) return;
    for (std::int32_t id : ids) {
      kernel_.erase(id);
      kernel_cut_.erase(id);
    }
    for (auto it = user_.begin(); it != user_.end();)
      it = ids.count(it->first.second) ? user_.erase(it) : std::next(it);
    for (auto it = user_cut_.begin(); it != user_cut_.end();)
      it = ids.count(it->second) ? user_cut_.erase(it) : std::next(it);
    for (auto it = unnamed_.begin(); it != unnamed_.end();)
      it = ids.count(it->first.second) ? unnamed_.erase(it) : std::next(it);
  }
  std::size_t cached() const { return user_.size() + kernel_.size(); }

 private:
  static std::uint32_t depth_of(int fd, std::uint32_t otherwise) {
    bpf_map_info info{};
    __u32 len = sizeof(info);
    if (fd < 0 || bpf_obj_get_info_by_fd(fd, &info, &len) != 0 || info.value_size == 0)
      return otherwise;
    return info.value_size / static_cast<std::uint32_t>(sizeof(std::uint64_t));
  }

  Frames symbolized(std::uint32_t pid, loupe_frame_kind kind,
                    const std::vector<std::uint64_t>& ips) const {
    // A frame may stand for several (a compiled Java frame and the methods inlined in it).
    Frames out;
    if (!ips.empty())
      host_.symbolize_stack(pid, kind, ips.data(), static_cast<std::uint32_t>(ips.size()), &out);
    return out;
  }

  void remember_unnamed(std::uint32_t tgid, std::int32_t id, const Frames& f,
                        RenameSchedule::Clock::time_point now) {
    bool named = false, gone = false;
    for (const loupe_frame& fr : f) {
      named |= fr.symbol != nullptr;
      gone |= fr.resolution == LOUPE_UNRESOLVED_PROCESS_GONE;
    }
    if (named || gone || f.empty())
      unnamed_.erase({tgid, id});
    else
      unnamed_[{tgid, id}].tried(now);
  }

  Host host_;
  int fd_;
  std::uint32_t max_depth_;
  std::map<std::pair<std::uint32_t, std::int32_t>, Frames> user_;
  std::map<std::int32_t, Frames> kernel_;
  std::map<std::pair<std::uint32_t, std::int32_t>, RenameSchedule> unnamed_;  // read again
  std::set<std::pair<std::uint32_t, std::int32_t>> user_cut_;  // filled the map's value
  std::set<std::int32_t> kernel_cut_;
  const Frames empty_;
};

}  // namespace loupe::sdk

#endif  // LOUPE_SDK_STACK_MAP_HPP
