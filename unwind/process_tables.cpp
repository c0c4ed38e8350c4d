// SPDX-License-Identifier: Apache-2.0
#include "unwind/process_tables.hpp"
#include "loupe/sdk/thread_name.hpp"

#include <bpf/bpf.h>
#include <spdlog/spdlog.h>

#include <dirent.h>
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <tuple>

namespace loupe {
namespace {

// utime + stime of /proc/PID/stat (fields 14 and 15, after the parenthesised comm).
std::uint64_t cpu_ticks(const std::string& proc_root, std::uint32_t pid) {
  char buf[1024];
  const std::string path = proc_root + "/" + std::to_string(pid) + "/stat";
  FILE* f = std::fopen(path.c_str(), "re");
  if (!f) return 0;
  const std::size_t n = std::fread(buf, 1, sizeof(buf) - 1, f);
  std::fclose(f);
  buf[n] = '\0';
  const char* p = std::strrchr(buf, ')');
  if (!p) return 0;
  unsigned long long utime = 0, stime = 0;
  // After ")": the state, fields 4 to 13, then utime (14) and stime (15).
  if (std::sscanf(p + 1, " %*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %llu %llu", &utime,
                  &stime) != 2)
    return 0;
  return utime + stime;
}

}  // namespace

ProcessTables::~ProcessTables() {
  {
    std::lock_guard lock(build_mu_);
    stopping_ = true;
  }
  build_cv_.notify_all();
  if (builder_.joinable()) builder_.join();
}

void ProcessTables::request_build(const RowStore::BuildJob& job, std::uint64_t priority) {
  {
    std::lock_guard lock(build_mu_);
    if (accepted_.insert(job.key).second) {
      queued_.emplace(job.key, Queued{priority, ++asks_, job});
    } else if (auto q = queued_.find(job.key); q != queued_.end()) {
      if (priority >= q->second.priority) q->second = {priority, ++asks_, q->second.job};
      return;
    } else {
      return;  // being built, or built
    }
    if (!builder_.joinable())
      builder_ = std::thread([this] {
        sdk::name_this_thread("loupe-tables");
        build_loop();
      });
  }
  build_cv_.notify_one();
}

void ProcessTables::build_loop() {
  std::unique_lock lock(build_mu_);
  for (;;) {
    build_cv_.wait(lock, [this] { return stopping_ || !queued_.empty(); });
    if (stopping_) return;
    auto next = std::max_element(queued_.begin(), queued_.end(), [](const auto& a, const auto& b) {
      return std::tie(a.second.priority, a.second.asked) <
             std::tie(b.second.priority, b.second.asked);
    });
    RowStore::BuildJob job = std::move(next->second.job);
    spdlog::debug("unwind tables: building {} (priority {}, {} more queued)", job.path,
                  next->second.priority, queued_.size() - 1);
    queued_.erase(next);
    lock.unlock();
    RowStore::Built b = RowStore::build(std::move(job));
    {
      // Into the kernel from here, not at the session's next tick: that thread can wait
      // on the symbolizer (a second in an emulated guest while a plugin named new stacks),
      // and the process would be walked by frame pointers all the while.
      std::lock_guard tables(mu_);
      spdlog::debug("unwind tables: {} built, {} waiting for it", b.job.path, waiting_.size());
      store_->add_built(std::move(b));
      for (auto& c : consumers_) write_rows(c);
      std::set<std::uint32_t> waiting;
      waiting.swap(waiting_);
      int err = 0;
      for (std::uint32_t pid : waiting) load_and_write(pid, &err);
    }
    lock.lock();
  }
}

Status ProcessTables::attach(int rows_fd, int procs_fd) {
  std::lock_guard tables(mu_);
  bpf_map_info rows{}, procs{};
  __u32 len = sizeof(rows);
  // A plugin built against ABI 1.5-1.10 declares rows of 12 bytes (loupe_unwind_row_v1):
  // written in that layout, so it keeps working with its own copy.
  if (bpf_obj_get_info_by_fd(rows_fd, &rows, &len) != 0 ||
      (rows.value_size != sizeof(loupe_unwind_row) &&
       rows.value_size != sizeof(loupe_unwind_row_v1)) ||
      rows.type != BPF_MAP_TYPE_ARRAY)
    return make_error("unwind_tables_attach: rows_fd is not an array of loupe_unwind_row");
  len = sizeof(procs);
  if (bpf_obj_get_info_by_fd(procs_fd, &procs, &len) != 0 ||
      procs.value_size != sizeof(loupe_unwind_proc) || procs.key_size != 4)
    return make_error("unwind_tables_attach: procs_fd is not a map of loupe_unwind_proc by tgid");
  // One store for all: its row numbers must fit the smallest consumer.
  if (!store_) {
    store_ = std::make_unique<RowStore>(watch_->proc_root(), rows.max_entries);
    store_->set_builder([this](const RowStore::BuildJob& job, std::uint64_t priority) {
      request_build(job, priority);
    });
  }
  consumers_.push_back(
      {rows_fd, procs_fd, rows.max_entries, rows.value_size == sizeof(loupe_unwind_row_v1)});
  {
    std::lock_guard lock(learnt_mu_);
    accepting_ = true;
  }
  write_rows(consumers_.back());
  for (const auto& [pid, p] : written_)
    if (bpf_map_update_elem(procs_fd, &pid, p.get(), BPF_ANY) != 0) ++write_errors_;
  return {};
}

Status ProcessTables::attach_files(int procs_fd, int files_fd) {
  std::lock_guard tables(mu_);
  bpf_map_info files{};
  __u32 len = sizeof(files);
  if (bpf_obj_get_info_by_fd(files_fd, &files, &len) != 0 ||
      files.value_size != sizeof(loupe_unwind_file) ||
      files.key_size != sizeof(loupe_unwind_file_key))
    return make_error(
        "unwind_files_attach: files_fd is not a map of loupe_unwind_file by file key");
  auto c = std::find_if(consumers_.begin(), consumers_.end(),
                        [procs_fd](const Consumer& x) { return x.procs_fd == procs_fd; });
  if (c == consumers_.end())
    return make_error(
        "unwind_files_attach: procs_fd was not attached (unwind_tables_attach first)");
  c->files_fd = files_fd;
  c->files_written = 0;
  write_rows(*c);
  return {};
}

void ProcessTables::mark_runtimes(std::uint32_t pid, const std::vector<MapsEntry>& maps,
                                  loupe_unwind_proc* proc) {
  proc->flags = runtimes_.update ? runtimes_.update(pid, maps) : 0;
}

void ProcessTables::rewrite_runtimes(std::uint32_t pid, std::uint32_t bits) {
  auto p = written_.find(pid);
  if (p == written_.end() || p->second->flags == bits) return;
  p->second->flags = bits;
  for (auto& c : consumers_)
    if (bpf_map_update_elem(c.procs_fd, &pid, p->second.get(), BPF_ANY) != 0) ++write_errors_;
}

void ProcessTables::write_rows(Consumer& c) {
  write_new_rows(c);
  if (c.files_fd < 0) return;
  // Files whose rows the consumer holds: a process without an entry finds them by inode.
  const auto& order = store_->file_order();
  for (; c.files_written < order.size(); ++c.files_written) {
    const auto& [key, f] = *order[c.files_written];
    const std::uint32_t end =
        f.page_count ? f.page_first + f.page_count + 1 : f.row_first + f.row_count;
    if (f.row_count == 0 || end > c.written) continue;
    loupe_unwind_file_key k{};
    k.ino = key.second;
    // The kernel's dev_t: MKDEV(major, minor) = major << 20 | minor.
    k.dev = static_cast<std::uint32_t>(((key.first >> 32) << 20) | (key.first & 0xfffff));
    loupe_unwind_file v{};
    v.row_first = f.row_first;
    v.row_count = f.row_count;
    v.page_first = f.page_first;
    v.page_count = f.page_count;
    v.page_base = f.page_base;
    for (const auto& seg : f.table.segments) {
      if (!seg.executable || v.n_segments >= LOUPE_UNWIND_FILE_SEGMENTS) continue;
      v.segments[v.n_segments++] = {seg.offset, seg.vaddr, seg.filesz};
    }
    if (bpf_map_update_elem(c.files_fd, &k, &v, BPF_ANY) != 0) ++write_errors_;
  }
}

void ProcessTables::write_new_rows(Consumer& c) {
  const auto& rows = store_->rows();
  const std::uint32_t end =
      std::min<std::uint32_t>(static_cast<std::uint32_t>(rows.size()), c.capacity);
  if (c.written >= end) return;
  std::vector<std::uint32_t> keys(end - c.written);
  for (std::uint32_t i = 0; i < keys.size(); ++i) keys[i] = c.written + i;
  std::vector<loupe_unwind_row_v1> v1;
  if (c.legacy) {
    v1.reserve(keys.size());
    for (std::uint32_t k = c.written; k < end; ++k) {
      const loupe_unwind_row& r = rows[k];
      v1.push_back({r.pc, static_cast<__u8>(loupe_unwind_row_cfa(&r)),
                    static_cast<__u8>(loupe_unwind_row_rbp(&r)),
                    static_cast<__s16>(loupe_unwind_row_rbp_off(&r)),
                    loupe_unwind_row_cfa_off(&r)});
    }
  }
  const std::size_t size = c.legacy ? sizeof(loupe_unwind_row_v1) : sizeof(loupe_unwind_row);
  const char* values = c.legacy ? reinterpret_cast<const char*>(v1.data())
                                : reinterpret_cast<const char*>(&rows[c.written]);
  __u32 count = static_cast<__u32>(keys.size());
  LIBBPF_OPTS(bpf_map_batch_opts, opts);
  if (bpf_map_update_batch(c.rows_fd, keys.data(), values, &count, &opts) != 0) {
    // Kernels without batch ops on arrays: one at a time.
    for (std::uint32_t k = c.written; k < end; ++k)
      if (bpf_map_update_elem(c.rows_fd, &k, values + (k - c.written) * size, BPF_ANY) != 0) {
        ++write_errors_;
        break;
      }
  }
  c.written = end;
}

std::size_t ProcessTables::prebuild(const std::string& exe) {
  std::lock_guard tables(mu_);
  if (!store_) return 0;
  const std::size_t n = store_->prebuild(exe);
  // The rows go in now too: copying 100k rows takes tens of milliseconds, which the
  // command would otherwise spend unwound by frame pointers.
  for (auto& c : consumers_) write_rows(c);
  return n;
}

void ProcessTables::learn_file(std::uint32_t pid, const std::string& path, std::uint32_t dev_major,
                               std::uint32_t dev_minor, std::uint64_t inode) {
  const FileKey key{(std::uint64_t{dev_major} << 32) | dev_minor, inode};
  std::lock_guard lock(learnt_mu_);
  if (accepting_) arrived_.try_emplace(key, LearntFile{pid, path});
}

void ProcessTables::forget(std::uint32_t pid) {
  std::lock_guard tables(mu_);
  forget_locked(pid);
}

void ProcessTables::forget_locked(std::uint32_t pid) {
  tracked_.erase(pid);
  read_generation_.erase(pid);
  waiting_.erase(pid);
  cpu_.erase(pid);
  if (runtimes_.forget) runtimes_.forget(pid);
  watch_->exited(pid);
  if (written_.erase(pid))
    for (auto& c : consumers_) bpf_map_delete_elem(c.procs_fd, &pid);
}

bool ProcessTables::refresh() {
  std::lock_guard tables(mu_);
  busy_ = false;
  if (consumers_.empty()) return false;
  // What the walks met for the first time since the last tick (code objects, methods),
  // read while their processes live; runtimes that were not ready asked again.
  if (runtimes_.poll)
    runtimes_.poll([this](std::uint32_t pid, std::uint32_t bits) { rewrite_runtimes(pid, bits); });
  constexpr std::uint64_t kScanEveryNs = 1'000'000'000ull, kRereadEveryNs = 3'000'000'000ull,
                          kFirstRankNs = 200'000'000ull;
  const std::uint64_t now =
      static_cast<std::uint64_t>(std::chrono::duration_cast<std::chrono::nanoseconds>(
                                     std::chrono::steady_clock::now().time_since_epoch())
                                     .count());
  const bool following = all_ && watch_->following();
  if (following) follow_changes(now);
  // Following the records, /proc is scanned at the start, after lost records, and while
  // files wait to be built (the scan's CPU figures rank them); never on an idle machine.
  const bool scan = !following || next_scan_ns_ == 0 || rescan_ || store_->pending() > 0;
  if (all_ && scan && now >= next_scan_ns_) {
    // The first scan knows no process's recent CPU: each one's total since it started
    // would put a day-old daemon ahead of the program running now (a guest's ctest and
    // its neighbours kept xz's tables from being built in 5 s). A process that starts
    // later shows its CPU since then. The second scan comes soon, so that the processes
    // running now are ranked while the first scan's files are still queued.
    const bool first = next_scan_ns_ == 0;
    next_scan_ns_ = now + (first ? kFirstRankNs : kScanEveryNs);
    // loupe itself is never sampled by its own system-wide session, yet it is the busiest
    // process there (this builder's work is its CPU): its ~35 libraries came before xz's
    // two files, and under emulation beside two busy loops took the whole 5 s session.
    static const auto self = static_cast<std::uint32_t>(::getpid());
    if (DIR* d = ::opendir((watch_->proc_root()).c_str())) {
      while (dirent* e = ::readdir(d)) {
        char* end = nullptr;
        const unsigned long pid = std::strtoul(e->d_name, &end, 10);
        if (pid == 0 || !end || *end != '\0') continue;
        const auto p = static_cast<std::uint32_t>(pid);
        if (p == self) continue;
        auto [t, added] = tracked_.try_emplace(p, 0);
        if (rescan_) t->second = 0;
        const std::uint64_t ticks = cpu_ticks(watch_->proc_root(), p);
        auto& [last, grew] = cpu_[p];
        grew = !first && ticks >= last ? ticks - last : 0;
        last = ticks;
      }
      ::closedir(d);
    }
    rescan_ = false;
  }
  // Files the kernel's records named: most belong to processes whose maps are gone by
  // now, and are what the next process running them is unwound by. They come last: under
  // a churn of short commands (a build, a test runner) they would otherwise keep the
  // processes that run most waiting behind files that may never run again.
  {
    std::lock_guard lock(learnt_mu_);
    for (auto& [key, f] : arrived_)
      if (!store_->files().count(key)) learnt_.try_emplace(key, std::move(f));
    arrived_.clear();
  }
  store_->set_priority(0);
  for (const auto& [key, f] : learnt_) store_->learn_file(f.pid, key.first, key.second, f.path);
  learnt_.clear();
  // The processes that ran most since the last scan first, so the builder starts on
  // their files: a target's before anything else; a system-wide run's by the CPU each used
  // (+1: above the learnt files).
  std::vector<std::pair<std::uint64_t, std::uint32_t>> order;
  order.reserve(tracked_.size());
  for (const auto& [pid, due] : tracked_)
    if (due <= now) {
      auto c = cpu_.find(pid);
      order.emplace_back(!all_             ? ~std::uint64_t{0}
                         : c == cpu_.end() ? 1
                                           : c->second.second + 1,
                         pid);
    }
  std::stable_sort(order.begin(), order.end(),
                   [](const auto& x, const auto& y) { return x.first > y.first; });
  bool changed = false;
  std::vector<std::uint32_t> gone;
  busy_ = busy_ || !order.empty() || store_->pending() > 0;
  for (const auto& [priority, pid] : order) {
    store_->set_priority(priority);
    int err = 0;
    const int written = load_and_write(pid, &err);
    if (written < 0) {
      // Its maps can be unreadable for a moment (mid-exec): only a process that is gone
      // is forgotten; the others are read again at the next tick. One loupe may not read
      // (EACCES: init, or another user's once privileges dropped) is read again only when
      // it changes, or every few seconds: at every tick it was most of an idle agent's
      // work.
      if (err == EACCES || err == EPERM) {
        ++unreadable_;
        tracked_[pid] = following ? kNever : now + kRereadEveryNs;
      } else if (::kill(static_cast<pid_t>(pid), 0) != 0 && errno == ESRCH) {
        gone.push_back(pid);
      }
      continue;
    }
    // A target is re-read every tick (its exec and dlopen matter at once); a process of a
    // system-wide run when its records say it changed, else every few seconds; and by the
    // builder as soon as a file it waits for is built.
    tracked_[pid] = following ? kNever
                    : all_    ? now + kRereadEveryNs + (pid % 1000) * 1'000'000ull
                              : 0;
    changed |= written > 0;
  }
  for (std::uint32_t pid : gone) forget_locked(pid);
  return changed;
}

void ProcessTables::follow_changes(std::uint64_t now) {
  // Read once the loader (or a dlopen's burst) is done: a command that ends sooner is
  // never read, and the files it ran are learnt from its records.
  constexpr std::uint64_t kSettleNs = 50'000'000ull;
  static const auto self = static_cast<std::uint32_t>(::getpid());
  std::vector<std::uint32_t> gone;
  watch_->poll([&](const ProcessWatch::Change& c) {
    using Kind = ProcessWatch::Change::Kind;
    busy_ = true;
    switch (c.kind) {
      case Kind::kForked:
      case Kind::kExeced:
      case Kind::kMapped: {
        if (c.pid == self) return;
        auto& due = tracked_[c.pid];
        if (due == 0 || due == kNever || due > now + kSettleNs) due = now + kSettleNs;
        if (c.map && c.map->file_backed() && !c.map->deleted) {
          const FileKey key{(std::uint64_t{c.map->dev_major} << 32) | c.map->dev_minor,
                            c.map->inode};
          if (!store_->files().count(key)) learnt_.try_emplace(key, LearntFile{c.pid, c.map->path});
        }
        break;
      }
      case Kind::kExited:
        // Gone before its settle time: never read, its files learnt from its records.
        if (auto t = tracked_.find(c.pid);
            t != tracked_.end() && t->second != kNever && !written_.count(c.pid))
          ++ended_unread_;
        gone.push_back(c.pid);
        break;
      case Kind::kLost: rescan_ = true; break;
    }
  });
  for (std::uint32_t pid : gone) forget_locked(pid);
}

int ProcessTables::load_and_write(std::uint32_t pid, int* err) {
  auto proc = std::make_unique<loupe_unwind_proc>();
  std::uint64_t& generation = read_generation_[pid];
  const auto read = watch_->maps(pid, generation, err);
  if (!read) {
    read_generation_.erase(pid);
    return -1;
  }
  generation = read->generation;
  const std::vector<MapsEntry>& maps = read->maps;
  store_->load_process(pid, maps, proc.get());
  if (store_->deferred()) waiting_.insert(pid);
  auto last = written_.find(pid);
  // The mappings decide; the flags are this side's, set below when they changed.
  if (last != written_.end()) proc->flags = last->second->flags;
  if (last != written_.end() && std::memcmp(last->second.get(), proc.get(), sizeof(*proc)) == 0)
    return 0;
  if (last == written_.end() && proc->count == 0) return 0;  // a kernel thread, or waiting
  mark_runtimes(pid, maps, proc.get());
  // Rows first: an entry must never point at rows a consumer does not have yet (a file
  // met under a second key adds its entry to loupe_unwind_files).
  for (auto& c : consumers_) write_rows(c);
  for (auto& c : consumers_)
    if (bpf_map_update_elem(c.procs_fd, &pid, proc.get(), BPF_ANY) != 0) ++write_errors_;
  if (last == written_.end())
    last = written_.emplace(pid, std::make_unique<loupe_unwind_proc>()).first;
  *last->second = *proc;
  spdlog::debug("unwind tables: pid {}: {} mapping(s) written", pid, proc->count);
  return 1;
}

ProcessTables::Counters ProcessTables::counters() const {
  std::lock_guard tables(mu_);
  Counters c;
  c.processes = written_.size();
  c.write_errors = write_errors_;
  c.unreadable = unreadable_;
  c.ended_unread = ended_unread_;
  if (!store_) return c;
  const auto& s = store_->stats();
  c.files = s.files;
  c.files_failed = s.files_failed;
  c.rows = store_->rows().size();
  c.rows_full = s.rows_full;
  c.build_ns = s.build_ns;
  c.pending = store_->pending();
  return c;
}

}  // namespace loupe
