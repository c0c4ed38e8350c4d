// SPDX-License-Identifier: Apache-2.0
#include "unwind/row_store.hpp"

#include <fcntl.h>
#include <gelf.h>
#include <spdlog/spdlog.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <deque>
#include <set>

#include "symbols/elf_file.hpp"
#include "symbols/process_maps.hpp"
#include "symbols/process_watch.hpp"

namespace loupe {
namespace {

// The interpreter (PT_INTERP) and the DT_NEEDED names of the ELF file at `path`.
void elf_dependencies(const std::string& path, std::string* interp,
                      std::vector<std::string>* needed, std::vector<std::string>* runpath) {
  const ElfFile file(path);
  Elf* elf = file.get();
  std::size_t nph = 0;
  if (elf && elf_getphdrnum(elf, &nph) == 0) {
    for (std::size_t i = 0; i < nph; ++i) {
      GElf_Phdr ph;
      if (!gelf_getphdr(elf, static_cast<int>(i), &ph) || ph.p_type != PT_INTERP) continue;
      std::size_t size = 0;
      const char* raw = elf_rawfile(elf, &size);
      if (raw && ph.p_offset + ph.p_filesz <= size && ph.p_filesz > 1)
        interp->assign(raw + ph.p_offset, strnlen(raw + ph.p_offset, ph.p_filesz));
    }
  }
  for (Elf_Scn* scn = nullptr; elf && (scn = elf_nextscn(elf, scn)) != nullptr;) {
    GElf_Shdr sh;
    if (!gelf_getshdr(scn, &sh) || sh.sh_type != SHT_DYNAMIC || sh.sh_entsize == 0) continue;
    Elf_Data* data = elf_getdata(scn, nullptr);
    for (std::size_t i = 0; data && i < sh.sh_size / sh.sh_entsize; ++i) {
      GElf_Dyn dyn;
      if (!gelf_getdyn(data, static_cast<int>(i), &dyn)) break;
      if (dyn.d_tag != DT_NEEDED && dyn.d_tag != DT_RUNPATH && dyn.d_tag != DT_RPATH) continue;
      const char* name = elf_strptr(elf, sh.sh_link, dyn.d_un.d_val);
      if (!name) continue;
      (dyn.d_tag == DT_NEEDED ? needed : runpath)->emplace_back(name);
    }
  }
}

}  // namespace

std::size_t RowStore::prebuild(const std::string& exe) {
  // The dynamic loader's own search order, for what a distribution installs: the file's
  // RUNPATH, then the multiarch and plain library directories.
  static const char* const kDirs[] = {"/lib/x86_64-linux-gnu",
                                      "/usr/lib/x86_64-linux-gnu",
                                      "/lib64",
                                      "/usr/lib64",
                                      "/lib",
                                      "/usr/lib"};
  constexpr std::size_t kMaxFiles = 64;
  const std::uint32_t self = static_cast<std::uint32_t>(::getpid());
  std::size_t built = 0;
  std::set<std::string> seen;
  std::deque<std::string> todo = {exe};
  while (!todo.empty() && seen.size() < kMaxFiles) {
    const std::string path = todo.front();
    todo.pop_front();
    struct stat st {};
    if (!seen.insert(path).second || ::stat(path.c_str(), &st) != 0) continue;
    const std::uint64_t dev = (std::uint64_t{major(st.st_dev)} << 32) | minor(st.st_dev);
    if (!files_.count({dev, st.st_ino}) && file(self, dev, st.st_ino, path, true)) ++built;
    std::string interp;
    std::vector<std::string> needed, runpath;
    elf_dependencies(path, &interp, &needed, &runpath);
    if (!interp.empty()) todo.push_back(interp);
    const std::string origin = path.substr(0, path.rfind('/'));
    for (const auto& name : needed) {
      std::vector<std::string> dirs;
      for (const auto& list : runpath)
        for (std::size_t at = 0; at <= list.size();) {
          std::size_t colon = list.find(':', at);
          if (colon == std::string::npos) colon = list.size();
          std::string rp = list.substr(at, colon - at);
          if (rp.rfind("$ORIGIN", 0) == 0) rp = origin + rp.substr(7);
          if (!rp.empty()) dirs.push_back(rp);
          at = colon + 1;
        }
      dirs.insert(dirs.end(), std::begin(kDirs), std::end(kDirs));
      for (const auto& d : dirs) {
        const std::string cand = d + "/" + name;
        if (::access(cand.c_str(), R_OK) == 0) {
          todo.push_back(cand);
          break;
        }
      }
    }
  }
  return built;
}

const RowStore::FileEntry* RowStore::file(std::uint32_t pid, std::uint64_t dev, std::uint64_t inode,
                                          const std::string& path, bool now) {
  const FileKey key{dev, inode};
  if (auto it = files_.find(key); it != files_.end()) return &it->second;
  if (auto p = pending_.find(key); p != pending_.end()) {
    // Built meanwhile under another key (prebuilt by path while the maps' key waited).
    if (auto same = identities_.find(p->second); same != identities_.end())
      return &alias(key, same->second);
    // Asked again while being built: a busier process may raise its priority. A prebuild
    // (`now`) builds it at once: its command is about to run.
    if (!now) {
      deferred_ = true;
      builder_(BuildJob{key, p->second, path, {}}, priority_);
      return nullptr;
    }
  }
  // Through the process's root: the file as it sees it, in its own mount namespace. A
  // process gone since (a short command known from its mmap records) leaves its path in
  // loupe's namespace, used only when it is the same file.
  std::string at = proc_root_ + "/" + std::to_string(pid) + "/root" + path;
  struct stat st {};
  const bool through_root = ::stat(at.c_str(), &st) == 0 && ::access(at.c_str(), R_OK) == 0;
  if (!through_root) {
    if (::stat(path.c_str(), &st) != 0) return nullptr;
    at = path;
  }
  // The same file under another key: on overlayfs (containers, a guest's overlay root) a
  // process's maps name the lower file's device and inode while stat() gives the
  // overlay's, so a file prebuilt by path comes back from the maps under a key of its
  // own. It shares the rows already built (a second copy would fill the rows map: python
  // and its libraries twice did, leaving libpython without rows).
  const FileKey identity{(std::uint64_t{major(st.st_dev)} << 32) | minor(st.st_dev), st.st_ino};
  if (auto same = identities_.find(identity); same != identities_.end())
    return &alias(key, same->second);
  if (!through_root && identity != key) {
    // On overlayfs the maps' key is the lower file's: the path is this file when mapping
    // it here gives that key (a short command in a container or the guests' overlay root,
    // gone before its records were read, was never learnt: every later run of it walked
    // by frame pointers alone).
    std::uint32_t major_no = 0, minor_no = 0;
    std::uint64_t ino = 0;
    if (!mapped_identity(path, &major_no, &minor_no, &ino) ||
        FileKey{(std::uint64_t{major_no} << 32) | minor_no, ino} != key)
      return nullptr;
  }
  BuildJob job{key, identity, path, at};
  if (builder_ && !now) {
    deferred_ = true;
    // Under another key already (the overlay case, both keys met before either is built):
    // the alias above is made once it is back.
    if (pending_identities_.count(identity)) return nullptr;
    pending_.emplace(key, identity);
    pending_identities_.emplace(identity, key);
    builder_(job, priority_);
    return nullptr;
  }
  return &insert(build(std::move(job)));
}

// `key` shares the rows of the file built under `built` (the same file, another key).
const RowStore::FileEntry& RowStore::alias(const FileKey& key, const FileKey& built) {
  const FileEntry entry = files_.at(built);
  auto [slot, added] = files_.try_emplace(key, entry);
  order_.push_back(&*slot);
  return slot->second;
}

RowStore::Built RowStore::build(BuildJob job) {
  Built b;
  b.job = std::move(job);
  const auto t0 = std::chrono::steady_clock::now();
  if (Status built = build_file_rows(b.job.at, &b.table); !built)
    b.error = built.error();
  else
    b.pages = unwind_page_index(b.table.rows, &b.page_base);
  b.build_ns = static_cast<std::uint64_t>(
      std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now() - t0)
          .count());
  return b;
}

void RowStore::add_built(Built built) {
  const FileKey key = built.job.key, identity = built.job.identity;
  pending_.erase(key);
  pending_identities_.erase(identity);
  if (files_.count(key) || identities_.count(identity)) return;  // built at once meanwhile
  insert(std::move(built));
}

RowStore::FileEntry& RowStore::insert(Built b) {
  identities_.emplace(b.job.identity, b.job.key);
  auto [slot, added] = files_.try_emplace(b.job.key);
  order_.push_back(&*slot);
  FileEntry& f = slot->second;
  f.path = b.job.path;
  f.table = std::move(b.table);
  f.page_base = b.page_base;
  f.error = std::move(b.error);
  ++stats_.files;
  if (!f.error.empty()) {
    ++stats_.files_failed;
  } else if (rows_.size() + f.table.rows.size() + b.pages.size() > max_rows_) {
    ++stats_.rows_full;
    f.error = f.path + ": unwind rows full (" + std::to_string(max_rows_) + ")";
  } else {
    f.row_first = static_cast<std::uint32_t>(rows_.size());
    f.row_count = static_cast<std::uint32_t>(f.table.rows.size());
    rows_.insert(rows_.end(), f.table.rows.begin(), f.table.rows.end());
    f.page_first = static_cast<std::uint32_t>(rows_.size());
    f.page_count = b.pages.empty() ? 0 : static_cast<std::uint32_t>(b.pages.size() - 1);
    rows_.insert(rows_.end(), b.pages.begin(), b.pages.end());
  }
  f.table.rows.clear();
  f.table.rows.shrink_to_fit();
  f.build_ns = b.build_ns;
  stats_.build_ns += f.build_ns;
  spdlog::debug("unwind tables: {}: {} rows in {:.1f} ms{}", f.path, f.row_count,
                static_cast<double>(f.build_ns) / 1e6, f.error.empty() ? "" : " (" + f.error + ")");
  return f;
}

Status RowStore::load_process(std::uint32_t pid, loupe_unwind_proc* out) {
  int e = 0;
  const auto read = ProcessWatch(proc_root_).maps(pid, ProcessWatch::kNow, &e);
  if (!read) return make_error("pid " + std::to_string(pid) + ": " + std::strerror(e));
  load_process(pid, read->maps, out);
  return {};
}

void RowStore::load_process(std::uint32_t pid, const std::vector<MapsEntry>& maps,
                            loupe_unwind_proc* out) {
  std::memset(out, 0, sizeof(*out));
  deferred_ = false;
  for (const auto& m : maps) {
    if (!m.executable || !m.file_backed() || m.deleted) continue;
    const std::uint64_t dev = (std::uint64_t{m.dev_major} << 32) | m.dev_minor;
    const FileEntry* fp = file(pid, dev, m.inode, m.path, false);
    if (!fp) continue;
    const FileEntry& f = *fp;
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
    dst.page_first = f.page_first;
    dst.page_count = f.page_count;
    dst.page_base = f.page_base;
  }
}

}  // namespace loupe
