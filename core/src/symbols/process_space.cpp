// SPDX-License-Identifier: Apache-2.0
#include "symbols/process_space.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cinttypes>
#include <cstdio>
#include <string_view>

namespace loupe {

ProcessSpace::ProcessSpace(std::uint32_t pid, const std::string& proc_root,
                           const std::string& perf_map_dir)
    : pid_(pid),
      proc_dir_(proc_root + "/" + std::to_string(pid)),
      perf_map_([&] {
        auto at = locate_perf_map(pid, proc_dir_, perf_map_dir);
        return PerfMap(std::move(at.path), std::move(at.name));
      }()),
      fallback_jitdump_(perf_map_dir + "/jit-" + std::to_string(pid) + ".dump") {}

namespace {

// "jit-<digits>.dump" as the last path component. The digits are the pid as the runtime
// sees it, which differs from ours inside a PID namespace: any such file the process maps
// is its own dump, but one named after our pid is preferred.
bool is_jitdump_path(const std::string& path, const std::string& own_name) {
  if (path.ends_with(own_name)) return true;
  auto slash = path.rfind('/');
  std::string_view base = std::string_view(path).substr(slash == std::string::npos ? 0 : slash + 1);
  if (!base.starts_with("jit-") || !base.ends_with(".dump")) return false;
  std::string_view digits = base.substr(4, base.size() - 4 - 5);
  return !digits.empty() &&
         std::all_of(digits.begin(), digits.end(), [](char c) { return c >= '0' && c <= '9'; });
}

// Device and inode of the process's executable; 0 when it is gone or unreadable.
}  // namespace

JitDump& ProcessSpace::jitdump() {
  const std::string& name = mapped_jitdump_.empty() ? fallback_jitdump_ : mapped_jitdump_;
  std::string path = mapped_jitdump_.empty() ? name : proc_dir_ + "/root" + name;
  if (!jitdump_ || jitdump_->path() != path) {
    jitdump_ = std::make_unique<JitDump>(path);
    jitdump_name_ = name;
    jitdump_module = nullptr;
  }
  return *jitdump_;
}

bool ProcessSpace::reload(ProcessWatch& watch, bool now, StringPool& strings, ElfFileCache& files,
                          int* err) {
  // A zombie (exited, not yet reaped) lists none: it is gone, and what was learnt of it
  // (its last read, the kernel's mmap records) is all there will be.
  const auto read = watch.maps(pid_, now ? ProcessWatch::kNow : maps_generation_, err);
  if (!read) return false;
  if (read->maps.empty()) {
    *err = ESRCH;
    return false;
  }
  maps_generation_ = read->generation;
  // The image's identity was read before the maps: an exec racing the read leaves an
  // identity that no longer matches, and the next exec check reloads, instead of old maps
  // being kept under the new image's name.
  const std::uint64_t exe_before = read->exe_id;
  std::vector<MappedRegion> fresh;
  fresh.reserve(read->maps.size());
  for (const MapsEntry& m : read->maps) {
    MappedRegion r;
    // An unchanged region keeps its table: a dlopen must not make libc be read again.
    auto old =
        std::lower_bound(regions_.begin(), regions_.end(), m.start,
                         [](const MappedRegion& a, std::uint64_t s) { return a.map.start < s; });
    if (old != regions_.end() && old->map.start == m.start && old->map.end == m.end &&
        old->map.offset == m.offset && old->map.inode == m.inode && old->map.path == m.path &&
        old->map.deleted == m.deleted) {
      r = std::move(*old);
    } else {
      r.map = m;
      if (r.map.path.empty())
        r.module = strings.intern("[anon]");
      else
        r.module = strings.intern(r.map.path);
    }
    fresh.push_back(std::move(r));
  }
  regions_ = std::move(fresh);
  std::string own_name = "/jit-" + std::to_string(pid_) + ".dump";
  std::string mapped;
  for (const MappedRegion& r : regions_) {
    if (r.map.deleted || !r.map.file_backed() || !is_jitdump_path(r.map.path, own_name)) continue;
    mapped = r.map.path;
    if (mapped.ends_with(own_name)) break;
  }
  mapped_jitdump_ = std::move(mapped);
  loaded_at_ = std::chrono::steady_clock::now();
  exe_id_ = exe_before;
  ++generation_;
  for (MappedRegion& r : regions_)
    if (r.map.executable && r.map.file_backed()) ensure_elf(r, files);
  return true;
}

bool ProcessSpace::exec_since_reload() const {
  std::uint64_t now = exe_identity(proc_dir_);
  return now != 0 && now != exe_id_;
}

MappedRegion* ProcessSpace::find(std::uint64_t addr) {
  auto it =
      std::upper_bound(regions_.begin(), regions_.end(), addr,
                       [](std::uint64_t a, const MappedRegion& r) { return a < r.map.start; });
  if (it == regions_.begin()) return nullptr;
  --it;
  return addr < it->map.end ? &*it : nullptr;
}

MappedRegion* ProcessSpace::find_data(std::uint64_t addr) {
  MappedRegion* r = find(addr);
  if (!r || !r->map.path.empty()) return r;
  auto idx = static_cast<std::size_t>(r - regions_.data());
  if (idx > 0 && regions_[idx - 1].map.end == r->map.start && regions_[idx - 1].map.file_backed())
    return &regions_[idx - 1];
  return r;
}

int ProcessSpace::open_mapped_file(const MapsEntry& m) const {
  // Through the process's own root, so files of another mount namespace (containers)
  // are found; the inode check catches a file replaced since it was mapped.
  if (!m.deleted) {
    std::string path = proc_dir_ + "/root" + m.path;
    int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd >= 0) {
      struct stat st {};
      if (::fstat(fd, &st) == 0 && st.st_ino == m.inode) return fd;
      ::close(fd);
    }
  }
  // The mapped file itself, even when unlinked or replaced (needs CAP_SYS_ADMIN).
  char range[64];
  std::snprintf(range, sizeof(range), "/map_files/%" PRIx64 "-%" PRIx64, m.start, m.end);
  int fd = ::open((proc_dir_ + range).c_str(), O_RDONLY | O_CLOEXEC);
  if (fd >= 0 || m.deleted) return fd;
  // When the inodes disagree for another reason (overlayfs reports the lower layer's
  // inode in maps): the path as named.
  fd = ::open((proc_dir_ + "/root" + m.path).c_str(), O_RDONLY | O_CLOEXEC);
  if (fd >= 0) return fd;
  // The process is gone (a region learnt from the kernel's mmap records): the same file
  // in our own mount namespace, if its inode says it is the one that was mapped.
  fd = ::open(m.path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd >= 0) {
    struct stat st {};
    if (::fstat(fd, &st) == 0 && st.st_ino == m.inode) return fd;
    ::close(fd);
  }
  return -1;
}

void ProcessSpace::apply_map(MapsEntry m, StringPool& strings, ElfFileCache& files) {
  // A new mapping replaces whatever it overlaps, as mmap(MAP_FIXED) does; the parts of an
  // old region outside it stay.
  std::vector<MappedRegion> kept;
  kept.reserve(regions_.size() + 2);
  for (MappedRegion& r : regions_) {
    if (r.map.end <= m.start || r.map.start >= m.end) {
      kept.push_back(std::move(r));
      continue;
    }
    if (r.map.start < m.start) {
      MappedRegion head = r;
      head.map.end = m.start;
      kept.push_back(std::move(head));
    }
    if (r.map.end > m.end) {
      MappedRegion tail = r;
      if (tail.map.file_backed()) tail.map.offset += m.end - tail.map.start;
      tail.map.start = m.end;
      if (tail.elf && tail.bias) tail.bias = tail.elf->bias_for(tail.map.start, tail.map.offset);
      kept.push_back(std::move(tail));
    }
  }
  const bool read_now = m.executable && m.file_backed();
  MappedRegion r;
  r.module = strings.intern(m.path.empty() ? std::string("[anon]") : m.path);
  r.map = std::move(m);
  auto at =
      std::lower_bound(kept.begin(), kept.end(), r.map.start,
                       [](const MappedRegion& a, std::uint64_t s) { return a.map.start < s; });
  const auto idx = static_cast<std::size_t>(at - kept.begin());
  kept.insert(at, std::move(r));
  regions_ = std::move(kept);
  ++generation_;
  // Read while the process most likely still lives: its root and map_files vanish with it.
  if (read_now) ensure_elf(regions_[idx], files);
}

void ProcessSpace::apply_exec() {
  regions_.clear();
  mapped_jitdump_.clear();
  unwinder.reset();
  exe_id_ = exe_identity(proc_dir_);
  ++generation_;
}

void ProcessSpace::inherit_from(const ProcessSpace& parent) {
  regions_ = parent.regions_;
  mapped_jitdump_ = parent.mapped_jitdump_;
  exe_id_ = parent.exe_id_;
  loaded_at_ = std::chrono::steady_clock::now();
  ++generation_;
}

bool ProcessSpace::ensure_elf(MappedRegion& r, ElfFileCache& cache) {
  if (r.elf_tried) return r.elf != nullptr;
  r.elf_tried = true;
  if (!r.map.file_backed()) return false;
  // Other mappings of the same file in this process already have the table.
  for (const MappedRegion& o : regions_) {
    if (&o != &r && o.elf && o.map.inode == r.map.inode && o.map.dev_major == r.map.dev_major &&
        o.map.dev_minor == r.map.dev_minor && o.map.path == r.map.path) {
      r.elf = o.elf;
      break;
    }
  }
  if (!r.elf) {
    int fd = open_mapped_file(r.map);
    if (fd < 0) {
      // Not cached: the file may be readable on a later try (a region first seen while its
      // process was between fork and exec, a transient permission or mount state).
      r.elf_tried = false;
      return false;
    }
    r.elf = cache.get(fd);
    ::close(fd);
  }
  if (r.elf) r.bias = r.elf->bias_for(r.map.start, r.map.offset);
  if (!r.bias) {
    // A region that no segment of the file explains was read mid-change (an exec racing
    // the maps read): retried after the next reload rather than remembered as unreadable.
    r.elf.reset();
    r.elf_tried = false;
  }
  return r.elf != nullptr;
}

}  // namespace loupe
