// SPDX-License-Identifier: Apache-2.0
#include "session/unwind_tables.hpp"

#include <bpf/bpf.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

namespace loupe {

bool UnwindTables::attach(int rows_fd, int procs_fd, std::string* err) {
  bpf_map_info rows{}, procs{};
  __u32 len = sizeof(rows);
  if (bpf_obj_get_info_by_fd(rows_fd, &rows, &len) != 0 ||
      rows.value_size != sizeof(loupe_unwind_row) || rows.type != BPF_MAP_TYPE_ARRAY) {
    *err = "unwind_tables_attach: rows_fd is not an array of loupe_unwind_row";
    return false;
  }
  len = sizeof(procs);
  if (bpf_obj_get_info_by_fd(procs_fd, &procs, &len) != 0 ||
      procs.value_size != sizeof(loupe_unwind_proc) || procs.key_size != 4) {
    *err = "unwind_tables_attach: procs_fd is not a map of loupe_unwind_proc by tgid";
    return false;
  }
  // One store for all: its row numbers must fit the smallest consumer.
  if (!store_) store_ = std::make_unique<UnwindTableStore>(proc_root_, rows.max_entries);
  consumers_.push_back({rows_fd, procs_fd, rows.max_entries});
  write_rows(consumers_.back());
  for (const auto& [pid, p] : written_)
    if (bpf_map_update_elem(procs_fd, &pid, p.get(), BPF_ANY) != 0) ++write_errors_;
  return true;
}

void UnwindTables::write_rows(Consumer& c) {
  const auto& rows = store_->rows();
  const std::uint32_t end =
      std::min<std::uint32_t>(static_cast<std::uint32_t>(rows.size()), c.capacity);
  if (c.written >= end) return;
  std::vector<std::uint32_t> keys(end - c.written);
  for (std::uint32_t i = 0; i < keys.size(); ++i) keys[i] = c.written + i;
  __u32 count = static_cast<__u32>(keys.size());
  LIBBPF_OPTS(bpf_map_batch_opts, opts);
  if (bpf_map_update_batch(c.rows_fd, keys.data(), &rows[c.written], &count, &opts) != 0) {
    // Kernels without batch ops on arrays: one at a time.
    for (std::uint32_t k = c.written; k < end; ++k)
      if (bpf_map_update_elem(c.rows_fd, &k, &rows[k], BPF_ANY) != 0) {
        ++write_errors_;
        break;
      }
  }
  c.written = end;
}

std::size_t UnwindTables::prebuild(const std::string& exe) {
  if (!store_) return 0;
  const std::size_t n = store_->prebuild(exe);
  // The rows go in now too: copying 100k rows takes tens of milliseconds, which the
  // command would otherwise spend unwound by frame pointers.
  for (auto& c : consumers_) write_rows(c);
  return n;
}

void UnwindTables::forget(std::uint32_t pid) {
  tracked_.erase(pid);
  if (written_.erase(pid))
    for (auto& c : consumers_) bpf_map_delete_elem(c.procs_fd, &pid);
}

bool UnwindTables::refresh() {
  if (consumers_.empty()) return false;
  bool changed = false;
  std::vector<std::uint32_t> gone;
  auto proc = std::make_unique<loupe_unwind_proc>();
  for (std::uint32_t pid : tracked_) {
    std::string err;
    if (!store_->load_process(pid, proc.get(), &err)) {
      gone.push_back(pid);
      continue;
    }
    auto& last = written_[pid];
    if (last && std::memcmp(last.get(), proc.get(), sizeof(*proc)) == 0) continue;
    // Rows first: an entry must never point at rows a consumer does not have yet.
    for (auto& c : consumers_) write_rows(c);
    for (auto& c : consumers_)
      if (bpf_map_update_elem(c.procs_fd, &pid, proc.get(), BPF_ANY) != 0) ++write_errors_;
    if (!last) last = std::make_unique<loupe_unwind_proc>();
    *last = *proc;
    changed = true;
    spdlog::debug("unwind tables: pid {}: {} mapping(s) written", pid, proc->count);
  }
  for (std::uint32_t pid : gone) forget(pid);
  return changed;
}

UnwindTables::Counters UnwindTables::counters() const {
  Counters c;
  c.processes = written_.size();
  c.write_errors = write_errors_;
  if (!store_) return c;
  const auto& s = store_->stats();
  c.files = s.files;
  c.files_failed = s.files_failed;
  c.rows = store_->rows().size();
  c.rows_full = s.rows_full;
  c.build_ns = s.build_ns;
  return c;
}

}  // namespace loupe
