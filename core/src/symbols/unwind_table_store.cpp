// SPDX-License-Identifier: Apache-2.0
#include "symbols/unwind_table_store.hpp"

#include <cerrno>
#include <chrono>
#include <cstring>

#include "symbols/process_maps.hpp"

namespace loupe {

const UnwindTableStore::FileEntry& UnwindTableStore::file(std::uint32_t pid, std::uint64_t dev,
                                                          std::uint64_t inode,
                                                          const std::string& path) {
  auto [it, inserted] = files_.try_emplace({dev, inode});
  FileEntry& f = it->second;
  if (!inserted) return f;
  f.path = path;
  ++stats_.files;
  const auto t0 = std::chrono::steady_clock::now();
  // Through the process's root: the file as it sees it, in its own mount namespace.
  const std::string at = proc_root_ + "/" + std::to_string(pid) + "/root" + path;
  if (!build_unwind_table(at, &f.table, &f.error)) {
    ++stats_.files_failed;
  } else if (rows_.size() + f.table.rows.size() > max_rows_) {
    ++stats_.rows_full;
    f.error = path + ": unwind rows full (" + std::to_string(max_rows_) + ")";
  } else {
    f.row_first = static_cast<std::uint32_t>(rows_.size());
    f.row_count = static_cast<std::uint32_t>(f.table.rows.size());
    rows_.insert(rows_.end(), f.table.rows.begin(), f.table.rows.end());
  }
  f.table.rows.clear();
  f.table.rows.shrink_to_fit();
  f.build_ns = static_cast<std::uint64_t>(
      std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now() - t0)
          .count());
  stats_.build_ns += f.build_ns;
  return f;
}

bool UnwindTableStore::load_process(std::uint32_t pid, loupe_unwind_proc* out, std::string* err) {
  std::vector<MapsEntry> maps;
  int e = 0;
  if (!read_process_maps(proc_root_, pid, &maps, &e)) {
    *err = "pid " + std::to_string(pid) + ": " + std::strerror(e);
    return false;
  }
  std::memset(out, 0, sizeof(*out));
  for (const auto& m : maps) {
    if (!m.executable || !m.file_backed() || m.deleted) continue;
    const std::uint64_t dev = (std::uint64_t{m.dev_major} << 32) | m.dev_minor;
    const FileEntry& f = file(pid, dev, m.inode, m.path);
    std::uint64_t bias = 0;
    if (f.row_count == 0 || !f.table.bias_for(m.start, m.offset, &bias)) continue;
    if (out->count >= LOUPE_UNWIND_MAX_MAPPINGS) {
      ++stats_.mappings_over;
      continue;
    }
    auto& dst = out->maps[out->count++];
    dst.start = m.start;
    dst.end = m.end;
    dst.bias = bias;
    dst.row_first = f.row_first;
    dst.row_count = f.row_count;
  }
  return true;
}

}  // namespace loupe
