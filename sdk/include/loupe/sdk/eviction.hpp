// SPDX-License-Identifier: Apache-2.0
//
// Memory that follows the live processes. In a rotating session (`[session] rotate`: an
// agent that runs for weeks) a profiler reports every interval what each key of its maps
// added, and every window is written whole. A process that exited, once its last counts
// were reported, then only fills the maps (until new processes' keys are refused and
// counted lost: keys_full) and the caches. Each profiler evicts such keys after its
// interval report:
//
//   auto gone = sdk::exited(tgids_of_the_last_read);  // before reading
//   ... read the maps, report the deltas ...
//   delete the keys of `gone`; StackSweep the stack ids only they referenced;
//   deltas_.end_read();   // forget the previous totals of keys no longer read
//
// The final report then holds the processes still alive; the exited ones are in the
// windows they ran in. Without rotation nothing is evicted: the final report is the
// whole session.
//
// Session thread (or the caller's lock); not thread-safe.
#ifndef LOUPE_SDK_EVICTION_HPP
#define LOUPE_SDK_EVICTION_HPP

#include <bpf/bpf.h>
#include <signal.h>

#include <cerrno>
#include <cstdint>
#include <map>
#include <set>
#include <string>
#include <utility>

#include "loupe/abi/plugin.h"
#include "loupe/sdk/host.hpp"
#include "loupe/sdk/plugin.hpp"
#include "loupe/sdk/records.hpp"

namespace loupe::sdk {

// Whether a profiler evicts exited processes' keys: only when the session's windows
// already hold what they counted.
inline bool evicts_exited(const loupe_session_info* session) {
  return rotate_seconds(session) > 0 && !(session->flags & LOUPE_SESSION_REPLAY);
}

// The tgids among `seen` that have exited and been reaped (kill() says ESRCH; a zombie
// still counts as alive). Called before the read: no thread of such a process can run,
// be sampled or block again, so the read that follows holds all it ever counted. What
// another process may still be charged for on its behalf (offcpu: a wake-up it made that
// its wakee has not run since) is the caller's to keep. tgid 0 (the idle task) never
// exits.
inline std::set<std::uint32_t> exited(const std::set<std::uint32_t>& seen) {
  std::set<std::uint32_t> out;
  for (std::uint32_t tgid : seen)
    if (tgid != 0 && ::kill(static_cast<pid_t>(tgid), 0) != 0 && errno == ESRCH) out.insert(tgid);
  return out;
}

// Stack ids that evicted keys referenced and no remaining key does, deleted from their
// store (a BPF stack map, or the in-kernel unwinder's loupe_unwind_slots) so new stacks
// find room. Stores are told apart by the fd ids are deleted through.
//
// A store also holds ids no key ever referenced: stacks taken for an event that made no
// key (offcpu takes the stack when a thread leaves the CPU, and keeps it only for a block
// over min_block_ns), which would fill it in minutes. orphans() adds them: an id that no
// key or entry referenced at the last sweep and still does not is freed; whatever took it
// then has since written the key or entry that would keep it.
class StackSweep {
 public:
  void evicted(int fd, std::int32_t id) {
    if (fd >= 0 && id >= 0) stores_[fd].evicted.insert(id);
  }
  void kept(int fd, std::int32_t id) {
    if (fd >= 0 && id >= 0) stores_[fd].kept.insert(id);
  }
  // Before the scans that call kept(): the ids the store holds now (its keys: a BPF stack
  // map's ids, the unwinder's slots), and the unreferenced ones of the last sweep, kept by
  // the caller between sweeps.
  void orphans(int fd, std::set<std::int32_t>* unreferenced_before) {
    if (fd < 0) return;
    Store& s = stores_[fd];
    s.unreferenced_before = unreferenced_before;
    std::uint32_t key = 0, next = 0;
    const std::uint32_t* prev = nullptr;
    while (bpf_map_get_next_key(fd, prev, &next) == 0) {
      s.present.insert(static_cast<std::int32_t>(next));
      key = next;
      prev = &key;
    }
  }
  // Deletes; returns the ids deleted, by store fd.
  std::map<int, std::set<std::int32_t>> erase() {
    std::map<int, std::set<std::int32_t>> out;
    for (auto& [fd, s] : stores_) {
      std::set<std::int32_t> unreferenced;
      for (std::int32_t id : s.present)
        if (!s.kept.count(id)) {
          unreferenced.insert(id);
          if (s.unreferenced_before && s.unreferenced_before->count(id)) s.evicted.insert(id);
        }
      for (std::int32_t id : s.evicted) {
        if (s.kept.count(id)) continue;
        std::uint32_t key = static_cast<std::uint32_t>(id);
        if (bpf_map_delete_elem(fd, &key) == 0) {
          out[fd].insert(id);
          unreferenced.erase(id);
        }
      }
      if (s.unreferenced_before) *s.unreferenced_before = std::move(unreferenced);
    }
    stores_.clear();
    return out;
  }

 private:
  struct Store {
    std::set<std::int32_t> evicted, kept, present;
    std::set<std::int32_t>* unreferenced_before = nullptr;
  };
  std::map<int, Store> stores_;
};

// The totals at the last interval report, by key, for interval deltas of counts that only
// grow. Keys not read since the last end_read() are forgotten, so the table follows the
// maps when keys are evicted.
template <typename V>
class PreviousTotals {
 public:
  V& at(const std::string& key) {
    Entry& e = by_key_[key];
    e.read = true;
    return e.value;
  }
  // An evicted key: a later key with the same bytes (a reused pid) starts from zero.
  void erase(const std::string& key) { by_key_.erase(key); }
  void end_read() {
    for (auto it = by_key_.begin(); it != by_key_.end();) {
      if (!it->second.read) {
        it = by_key_.erase(it);
        continue;
      }
      it->second.read = false;
      ++it;
    }
  }
  std::size_t size() const { return by_key_.size(); }

 private:
  struct Entry {
    V value{};
    bool read = false;  // since the last end_read()
  };
  std::map<std::string, Entry> by_key_;
};

// What a profiler evicted, as health rows `<plugin>/evicted_*` of record `record`: OK rows
// (eviction is the design, not a loss) and a WARN for the one race it cannot rule out.
struct EvictionCounts {
  std::uint64_t processes = 0;  // exited processes whose keys were deleted
  std::uint64_t keys = 0;
  std::uint64_t stacks = 0;  // stack ids only they used, freed
  std::uint64_t in_use = 0;  // events that took a freed id between the read and the delete

  void emit(const Host& host, const char* record, const std::string& plugin, bool is_final,
            std::uint64_t ws, std::uint64_t we) const {
    const std::string p = plugin + "/";
    const std::pair<std::string, std::uint64_t> ok[] = {
        {p + "evicted_processes", processes},
        {p + "evicted_keys", keys},
        {p + "evicted_stacks", stacks},
    };
    const char* why[] = {
        "exited processes whose counts went into their windows and were then evicted "
        "(rotate): the final report holds the processes still alive",
        "their keys deleted from the maps",
        "stack ids no key uses any more (theirs, or taken for an event that made no key), freed "
        "for new stacks"};
    for (std::size_t i = 0; i < 3; ++i) {
      RecordBuilder rb(LOUPE_RECORD_HEALTH, record);
      rb.final(is_final).window(ws, we);
      rb.health(LOUPE_HEALTH_OK, ok[i].first.c_str(), ok[i].second, why[i]).emit(host);
    }
    const std::string race = p + "evicted_in_use";
    const HealthRow rows[] = {
        {race.c_str(), in_use,
         "events that took a stack id as it was freed: their stack may be another's"}};
    emit_health_rows(host, record, rows, is_final, ws, we);
  }
};

}  // namespace loupe::sdk

#endif  // LOUPE_SDK_EVICTION_HPP
