// SPDX-License-Identifier: Apache-2.0
//
// The session's process tree: the target and every descendant, kept in the kernel from
// fork and exit (process_tree.bpf.c) in one BPF hash map the core owns. Loaded before any
// plugin starts; plugins' filters read the same map (loupe_session_info.tree_map_fd,
// bpf/include/loupe/filter.bpf.h, sdk::write_target_filter).
#ifndef LOUPE_KERNEL_PROCESS_TREE_HPP
#define LOUPE_KERNEL_PROCESS_TREE_HPP

#include <sys/types.h>

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "loupe/tree.h"
#include "util/result.hpp"

struct process_tree_bpf;
struct ring_buffer;
struct bpf_link;

namespace loupe {

class FeatureSet;

class ProcessTree {
 public:
  struct Options {
    std::uint32_t max_processes = 16384;  // the map's bound; forks beyond it are counted
    std::string mechanism = "auto";       // auto (tp_btf, raw_tp, tracepoint) or one of them
  };
  struct Counters {
    std::uint64_t joined = 0;       // processes that joined by fork while the session ran
    std::uint64_t left = 0;         // processes of the tree that exited
    std::uint64_t overflow = 0;     // forks not followed: the map was full
    std::uint64_t events_lost = 0;  // fork/exit events user space missed (ring full)
    std::uint64_t seeded = 0;       // processes found in /proc (the root included)
    std::uint64_t members = 0;      // processes in the map now
  };

  // Loads and attaches the tracker; an error when the kernel refuses it.
  static Result<std::unique_ptr<ProcessTree>> start(FeatureSet& features, const Options& opts);
  ~ProcessTree();
  ProcessTree(const ProcessTree&) = delete;
  ProcessTree& operator=(const ProcessTree&) = delete;

  // The tree map (owned; valid until destruction).
  int map_fd() const;
  const std::string& mechanism() const { return mechanism_; }

  // Puts `root` in the tree (depth 0); an error when the map refuses it.
  Status add_root(pid_t root);
  // `root` and its existing descendants from /proc (ppid links), repeated until a walk
  // finds nothing new so a fork racing the walk is not missed (forks after a parent's
  // insertion are the kernel's). Returns how many processes it inserted.
  std::size_t seed_from_proc(pid_t root, const std::string& proc_root = "/proc");

  // Drains the tracker's fork/exit events (session thread).
  void poll(const std::function<void(const loupe_tree_event&)>& on_event);

  Counters counters() const;
  bool contains(pid_t tgid) const;

 private:
  ProcessTree() = default;
  process_tree_bpf* skel_ = nullptr;
  ring_buffer* events_ = nullptr;
  std::vector<bpf_link*> links_;
  std::string mechanism_;
  std::uint32_t max_processes_ = 0;
  std::uint64_t seeded_ = 0;
  const std::function<void(const loupe_tree_event&)>* on_event_ = nullptr;
};

// Every process under `proc_root` as (pid, ppid), read from /proc/PID/stat.
std::vector<std::pair<pid_t, pid_t>> read_parent_links(const std::string& proc_root = "/proc");
// The descendants of `root` in `links` (not `root` itself), parents before children.
std::vector<pid_t> descendants_of(pid_t root, const std::vector<std::pair<pid_t, pid_t>>& links);

}  // namespace loupe

#endif  // LOUPE_KERNEL_PROCESS_TREE_HPP
