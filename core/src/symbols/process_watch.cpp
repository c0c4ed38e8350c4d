// SPDX-License-Identifier: Apache-2.0
#include "symbols/process_watch.hpp"

#include <unistd.h>

#include <cerrno>

namespace loupe {

Status ProcessWatch::follow_system() {
  if (events_) return {};
  auto ev = MappingEvents::open_system_wide(/*code_only=*/true);
  if (!ev) {
    follow_error_ = ev.error();
    return make_error(follow_error_);
  }
  events_ = std::move(ev).value();
  std::lock_guard lock(mu_);
  counters_.following = true;
  return {};
}

std::shared_ptr<const ProcessWatch::Snapshot> ProcessWatch::maps(std::uint32_t pid,
                                                                 std::uint64_t newer_than,
                                                                 int* err) {
  {
    std::lock_guard lock(mu_);
    auto it = entries_.find(pid);
    if (it != entries_.end() && !it->second.changed && newer_than != kNow &&
        it->second.read->generation > newer_than) {
      ++counters_.shared;
      return it->second.read;
    }
  }
  // Read outside the lock: a large process's maps take a millisecond, and the other
  // threads' asks for other processes need not wait for it.
  auto fresh = std::make_shared<Snapshot>();
  fresh->exe_id = exe_identity(proc_root_ + "/" + std::to_string(pid));
  int e = 0;
  const bool ok = read_process_maps(proc_root_, pid, &fresh->maps, &e);
  std::lock_guard lock(mu_);
  ++counters_.reads;
  if (!ok) {
    ++counters_.unreadable;
    entries_.erase(pid);
    if (err) *err = e ? e : ESRCH;
    return nullptr;
  }
  fresh->generation = ++generation_;
  Entry& entry = entries_[pid];
  entry.read = std::move(fresh);
  entry.changed = false;
  return entry.read;
}

void ProcessWatch::changed(std::uint32_t pid) {
  std::lock_guard lock(mu_);
  if (auto it = entries_.find(pid); it != entries_.end()) it->second.changed = true;
}

void ProcessWatch::exited(std::uint32_t pid) {
  std::lock_guard lock(mu_);
  entries_.erase(pid);
}

void ProcessWatch::poll(const std::function<void(const Change&)>& fn) {
  if (!events_) return;
  static const auto self = static_cast<std::uint32_t>(::getpid());
  const std::uint64_t lost_before = events_->counters().lost;
  events_->drain([&](const MappingEvent& e) {
    if (e.pid == self) return;
    Change c{Change::Kind::kMapped, e.pid, nullptr};
    switch (e.kind) {
      case MappingEvent::Kind::kFork: c.kind = Change::Kind::kForked; break;
      case MappingEvent::Kind::kExec: c.kind = Change::Kind::kExeced; break;
      case MappingEvent::Kind::kMap:
        if (!e.map.executable) return;
        c.map = &e.map;
        break;
      case MappingEvent::Kind::kExit: c.kind = Change::Kind::kExited; break;
    }
    {
      std::lock_guard lock(mu_);
      if (c.kind == Change::Kind::kExited) {
        ++counters_.exits;
        entries_.erase(e.pid);
      } else if (auto it = entries_.find(e.pid); it != entries_.end()) {
        ++counters_.changes;
        it->second.changed = true;
      }
    }
    fn(c);
  });
  const std::uint64_t lost = events_->counters().lost - lost_before;
  if (lost == 0) return;
  {
    std::lock_guard lock(mu_);
    counters_.records_lost += lost;
    for (auto& [pid, entry] : entries_) entry.changed = true;
  }
  fn({Change::Kind::kLost, 0, nullptr});
}

ProcessWatch::Counters ProcessWatch::counters() const {
  std::lock_guard lock(mu_);
  return counters_;
}

}  // namespace loupe
