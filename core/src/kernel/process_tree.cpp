// SPDX-License-Identifier: Apache-2.0
#include "kernel/process_tree.hpp"

#include <bpf/bpf.h>
#include <bpf/libbpf.h>
#include <dirent.h>
#include <fmt/format.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <map>
#include <set>
#include <sstream>
#include <type_traits>

#include "kernel/bpf_lifecycle.hpp"
#include "loupe/features.hpp"
#include "process_tree.skel.h"

namespace loupe {

std::vector<std::pair<pid_t, pid_t>> read_parent_links(const std::string& proc_root) {
  std::vector<std::pair<pid_t, pid_t>> out;
  DIR* d = ::opendir(proc_root.c_str());
  if (!d) return out;
  while (dirent* e = ::readdir(d)) {
    char* end = nullptr;
    long pid = std::strtol(e->d_name, &end, 10);
    if (pid <= 0 || *end) continue;
    std::ifstream in(proc_root + "/" + e->d_name + "/stat");
    std::string text;
    if (!std::getline(in, text)) continue;  // exited meanwhile
    // "pid (comm) state ppid ...": comm may hold spaces and parentheses; it ends at the
    // last ')'.
    auto close = text.rfind(')');
    if (close == std::string::npos) continue;
    std::istringstream rest(text.substr(close + 1));
    std::string state;
    long ppid = 0;
    if (!(rest >> state >> ppid)) continue;
    out.emplace_back(static_cast<pid_t>(pid), static_cast<pid_t>(ppid));
  }
  ::closedir(d);
  return out;
}

std::vector<pid_t> descendants_of(pid_t root, const std::vector<std::pair<pid_t, pid_t>>& links) {
  std::multimap<pid_t, pid_t> children;
  for (const auto& [pid, ppid] : links) children.emplace(ppid, pid);
  std::vector<pid_t> out;
  std::set<pid_t> seen{root};
  std::vector<pid_t> todo{root};
  while (!todo.empty()) {
    pid_t p = todo.back();
    todo.pop_back();
    auto [b, e] = children.equal_range(p);
    for (auto it = b; it != e; ++it)
      if (seen.insert(it->second).second) {
        out.push_back(it->second);
        todo.push_back(it->second);
      }
  }
  return out;
}

Result<std::unique_ptr<ProcessTree>> ProcessTree::start(FeatureSet& features, const Options& opts) {
  install_libbpf_logging();
  std::unique_ptr<ProcessTree> t(new ProcessTree());
  t->skel_ = process_tree_bpf__open();
  if (!t->skel_)
    return make_error(fmt::format("opening the process-tree object: {}", std::strerror(errno)));
  auto* s = t->skel_;
  struct Flavour {
    const char* feature;
    bpf_program* fork;
    bpf_program* exit;
  };
  const Flavour flavours[] = {{"tp_btf", s->progs.tree_btf_fork, s->progs.tree_btf_exit},
                              {"raw_tp", s->progs.tree_raw_fork, s->progs.tree_raw_exit},
                              {"tracepoint", s->progs.tree_tp_fork, s->progs.tree_tp_exit}};
  const Flavour* chosen = nullptr;
  std::string reasons;
  for (const auto& f : flavours) {
    if (opts.mechanism != "auto" && opts.mechanism != f.feature) continue;
    auto r = features.get(f.feature);
    if (r.available) {
      chosen = &f;
      break;
    }
    reasons += fmt::format("{}{}: {}", reasons.empty() ? "" : "; ", f.feature, r.reason);
  }
  if (!chosen)
    return make_error(reasons.empty() ? fmt::format("unknown mechanism '{}'", opts.mechanism)
                                      : fmt::format("no hook for fork/exit ({})", reasons));
  for (const auto& f : flavours) {
    bpf_program__set_autoload(f.fork, &f == chosen);
    bpf_program__set_autoload(f.exit, &f == chosen);
  }
  t->mechanism_ = chosen->feature;
  t->max_processes_ = opts.max_processes ? opts.max_processes : 1;
  bpf_map__set_max_entries(s->maps.loupe_tree, t->max_processes_);
  if (Status loaded = load_with_verifier_log(s->obj); !loaded)
    return make_error(fmt::format("loading the process-tree object: {}", loaded.error()));
  for (bpf_program* p : {chosen->fork, chosen->exit}) {
    bpf_link* link = bpf_program__attach(p);
    if (!link)
      return make_error(fmt::format("attaching {} ({}): {}", bpf_program__name(p), t->mechanism_,
                                    std::strerror(errno)));
    t->links_.push_back(link);
  }
  t->events_ = ring_buffer__new(
      bpf_map__fd(s->maps.tree_events),
      [](void* ctx, void* data, size_t len) -> int {
        auto* self = static_cast<ProcessTree*>(ctx);
        if (len < sizeof(loupe_tree_event) || !self->on_event_) return 0;
        loupe_tree_event ev;
        std::memcpy(&ev, data, sizeof(ev));
        (*self->on_event_)(ev);
        return 0;
      },
      t.get(), nullptr);
  if (!t->events_)
    return make_error(fmt::format("the process-tree event ring: {}", std::strerror(errno)));
  return t;
}

ProcessTree::~ProcessTree() {
  for (auto it = links_.rbegin(); it != links_.rend(); ++it) bpf_link__destroy(*it);
  if (events_) ring_buffer__free(events_);
  if (skel_) process_tree_bpf__destroy(skel_);
}

int ProcessTree::map_fd() const {
  return bpf_map__fd(skel_->maps.loupe_tree);
}

Status ProcessTree::add_root(pid_t root) {
  auto key = static_cast<std::uint32_t>(root);
  loupe_tree_entry v{0, 0};
  if (bpf_map_update_elem(map_fd(), &key, &v, BPF_ANY) != 0)
    return make_error(
        fmt::format("adding pid {} to the process tree: {}", root, std::strerror(errno)));
  ++seeded_;
  return {};
}

std::size_t ProcessTree::seed_from_proc(pid_t root, const std::string& proc_root) {
  std::size_t added = 0;
  for (int pass = 0; pass < 8; ++pass) {
    std::size_t before = added;
    for (pid_t p : descendants_of(root, read_parent_links(proc_root))) {
      auto key = static_cast<std::uint32_t>(p);
      loupe_tree_entry v{0, 1};
      // BPF_NOEXIST: an entry the tracker made (with its parent) stays as it is.
      if (bpf_map_update_elem(map_fd(), &key, &v, BPF_NOEXIST) == 0) ++added;
    }
    if (added == before) break;
  }
  seeded_ += added;
  return added;
}

void ProcessTree::poll(const std::function<void(const loupe_tree_event&)>& on_event) {
  on_event_ = &on_event;
  ring_buffer__consume(events_);
  on_event_ = nullptr;
}

ProcessTree::Counters ProcessTree::counters() const {
  Counters c;
  // Loaded with bpf_object__load (for the verifier log), not the skeleton's load, which
  // is what maps .bss into skel_->bss (libbpf 1.1): read the section through its map.
  using Bss = std::remove_pointer_t<decltype(skel_->bss)>;
  Bss bss{};
  std::uint32_t zero = 0;
  if (bpf_map_lookup_elem(bpf_map__fd(skel_->maps.bss), &zero, &bss) != 0) return c;
  const Bss* b = &bss;
  c.seeded = seeded_;
  c.joined = b->tree_joined;
  c.left = b->tree_left;
  c.overflow = b->tree_overflow;
  c.events_lost = b->tree_events_lost;
  std::uint32_t key = 0, next = 0;
  bool first = true;
  while (bpf_map_get_next_key(map_fd(), first ? nullptr : &key, &next) == 0) {
    ++c.members;
    key = next;
    first = false;
  }
  return c;
}

bool ProcessTree::contains(pid_t tgid) const {
  auto key = static_cast<std::uint32_t>(tgid);
  loupe_tree_entry v{};
  return bpf_map_lookup_elem(map_fd(), &key, &v) == 0;
}

}  // namespace loupe
