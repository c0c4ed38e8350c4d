// SPDX-License-Identifier: Apache-2.0
#include "symbols/jitdump.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <iterator>

namespace loupe {
namespace {

// perf's tools/perf/util/jitdump.h.
constexpr std::uint32_t kMagic = 0x4A695444;  // "JiTD"
constexpr std::uint32_t kMagicSwapped = 0x4454694A;
constexpr std::size_t kHeaderSize = 40;  // magic..flags of version 1
constexpr std::size_t kPrefixSize = 16;  // id, total_size, timestamp
constexpr std::uint32_t kCodeLoad = 0;
constexpr std::uint32_t kCodeMove = 1;
constexpr std::size_t kLoadNameAt = kPrefixSize + 40;  // pid tid vma code_addr size index
constexpr std::size_t kMoveSize = kPrefixSize + 48;
// Larger than any header or record a runtime writes (records carry the code, a few KiB to
// a few MiB): beyond these the framing is garbage, not a record still being written.
constexpr std::uint64_t kMaxHeaderSize = 1 << 20;
constexpr std::uint64_t kMaxRecordSize = 1 << 30;
constexpr std::size_t kReadChunk = 256 * 1024;

}  // namespace

bool JitDump::refresh() {
  struct stat st {};
  if (::stat(path_.c_str(), &st) != 0 || !S_ISREG(st.st_mode)) return false;
  bool same_file = have_file_ && st.st_dev == dev_ && st.st_ino == ino_ &&
                   static_cast<std::uint64_t>(st.st_size) >= offset_;
  if (same_file && (broken_ || static_cast<std::uint64_t>(st.st_size) == seen_size_)) return true;
  int fd = ::open(path_.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return false;
  if (::fstat(fd, &st) != 0) {
    ::close(fd);
    return false;
  }
  if (!have_file_ || st.st_dev != dev_ || st.st_ino != ino_ ||
      static_cast<std::uint64_t>(st.st_size) < offset_) {
    reset();  // a new file (a new process with the recycled pid), or one truncated
    have_file_ = true;
    dev_ = st.st_dev;
    ino_ = st.st_ino;
  }
  auto size = static_cast<std::uint64_t>(st.st_size);
  if (!broken_) parse(fd, size);
  seen_size_ = size;
  buf_.clear();  // the window is only valid while the file is open
  buf_.shrink_to_fit();
  ::close(fd);
  return true;
}

void JitDump::reset() {
  entries_.clear();
  order_.clear();
  have_header_ = swapped_ = broken_ = false;
  offset_ = seen_size_ = 0;
}

bool JitDump::read_at(int fd, std::uint64_t off, std::size_t len, std::uint64_t file_size,
                      const std::uint8_t** out) {
  if (off > file_size || len > file_size - off) return false;
  if (off < buf_off_ || off - buf_off_ > buf_.size() || len > buf_.size() - (off - buf_off_)) {
    std::size_t want = static_cast<std::size_t>(
        std::min<std::uint64_t>(file_size - off, std::max(len, kReadChunk)));
    buf_.resize(want);
    buf_off_ = off;
    std::size_t got = 0;
    while (got < want) {
      ssize_t n = ::pread(fd, buf_.data() + got, want - got, static_cast<off_t>(off + got));
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) break;  // shrank under us: the next refresh() starts over
      got += static_cast<std::size_t>(n);
    }
    buf_.resize(got);
    if (got < len) return false;
  }
  *out = buf_.data() + (off - buf_off_);
  return true;
}

namespace {

struct Reader {
  const std::uint8_t* p;
  bool swapped;
  std::uint32_t u32(std::size_t at) const {
    std::uint32_t v;
    std::memcpy(&v, p + at, sizeof(v));
    return swapped ? __builtin_bswap32(v) : v;
  }
  std::uint64_t u64(std::size_t at) const {
    std::uint64_t v;
    std::memcpy(&v, p + at, sizeof(v));
    return swapped ? __builtin_bswap64(v) : v;
  }
};

}  // namespace

void JitDump::parse(int fd, std::uint64_t file_size) {
  if (!have_header_) {
    const std::uint8_t* h = nullptr;
    if (!read_at(fd, 0, kHeaderSize, file_size, &h)) return;  // not all written yet
    std::uint32_t magic;
    std::memcpy(&magic, h, sizeof(magic));
    if (magic != kMagic && magic != kMagicSwapped) {
      broken_ = true;
      return;
    }
    swapped_ = magic == kMagicSwapped;
    std::uint32_t header_size = Reader{h, swapped_}.u32(8);
    if (header_size < kHeaderSize || header_size > kMaxHeaderSize) {
      broken_ = true;
      return;
    }
    if (header_size > file_size) return;
    have_header_ = true;
    offset_ = header_size;
  }
  while (parse_record(fd, file_size)) {
  }
}

bool JitDump::parse_record(int fd, std::uint64_t file_size) {
  const std::uint8_t* p = nullptr;
  if (!read_at(fd, offset_, kPrefixSize, file_size, &p)) return false;
  Reader prefix{p, swapped_};
  std::uint32_t id = prefix.u32(0);
  std::uint32_t total = prefix.u32(4);
  if (total < kPrefixSize || total > kMaxRecordSize) {
    broken_ = true;
    return false;
  }
  if (total > file_size - offset_) return false;  // still being written
  if (id == kCodeLoad && total > kLoadNameAt) {
    std::size_t head = std::min<std::size_t>(total, kLoadNameAt + kMaxNameLength + 1);
    if (!read_at(fd, offset_, head, file_size, &p)) return false;
    Reader r{p, swapped_};
    std::uint64_t addr = r.u64(32), size = r.u64(40);
    const char* name = reinterpret_cast<const char*>(p + kLoadNameAt);
    std::size_t room = head - kLoadNameAt;
    std::size_t len = static_cast<std::size_t>(
        static_cast<const char*>(std::memchr(name, '\0', room)) ? std::strlen(name) : room);
    // A name without its NUL inside the record is malformed; one cut by our bound is not.
    bool terminated = len < room || head < total;
    len = std::min(len, kMaxNameLength);
    if (terminated && len > 0 && size > 0 && size <= UINT64_MAX - addr) {
      load(addr, size, std::string(name, len));
      ++records_;
    }
  } else if (id == kCodeMove && total >= kMoveSize) {
    if (!read_at(fd, offset_, kMoveSize, file_size, &p)) return false;
    Reader r{p, swapped_};
    std::uint64_t from = r.u64(32), to = r.u64(40), size = r.u64(48);
    if (size > 0 && size <= UINT64_MAX - to) {
      move(from, to, size);
      ++records_;
    }
  }
  // Debug info, unwinding info, close and ids from later versions: not names, skipped.
  offset_ += total;
  return true;
}

void JitDump::load(std::uint64_t addr, std::uint64_t size, std::string name) {
  erase_overlapping(addr, size);
  while (entries_.size() >= max_entries_) {
    erase(entries_.find(order_.front()));
    ++evictions_;
  }
  order_.push_back(addr);
  entries_.emplace(addr, Entry{size, std::move(name), std::prev(order_.end())});
}

void JitDump::move(std::uint64_t from, std::uint64_t to, std::uint64_t size) {
  auto it = entries_.find(from);
  if (it == entries_.end()) return;  // evicted, or loaded before we could read it
  std::string name = std::move(it->second.name);
  erase(it);
  load(to, size, std::move(name));
}

void JitDump::erase_overlapping(std::uint64_t addr, std::uint64_t size) {
  std::uint64_t end = addr + size;
  auto it = entries_.lower_bound(addr);
  if (it != entries_.begin()) {
    auto before = std::prev(it);
    if (before->second.size > addr - before->first) erase(before);
  }
  while (it != entries_.end() && it->first < end) erase(it++);
}

void JitDump::erase(std::map<std::uint64_t, Entry>::iterator it) {
  order_.erase(it->second.age);
  entries_.erase(it);
}

bool JitDump::lookup(std::uint64_t addr, Hit* hit) const {
  auto it = entries_.upper_bound(addr);
  if (it == entries_.begin()) return false;
  --it;
  if (addr - it->first >= it->second.size) return false;
  hit->name = it->second.name;
  hit->offset = addr - it->first;
  hit->interned = &it->second.interned;
  return true;
}

}  // namespace loupe
