// SPDX-License-Identifier: Apache-2.0
#include "symbols/process_maps.hpp"

#include <sys/mman.h>
#include <sys/stat.h>

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <string_view>

namespace loupe {
namespace {

constexpr std::string_view kDeletedSuffix = " (deleted)";

bool take_hex(std::string_view& s, std::uint64_t* out, char sep) {
  auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), *out, 16);
  if (ec != std::errc() || p == s.data() || p == s.data() + s.size() || *p != sep) return false;
  s.remove_prefix(static_cast<std::size_t>(p - s.data()) + 1);
  return true;
}

std::string_view take_field(std::string_view& s) {
  auto sp = s.find(' ');
  std::string_view f = s.substr(0, sp);
  s.remove_prefix(sp == std::string_view::npos ? s.size() : sp + 1);
  return f;
}

}  // namespace

std::vector<MapsEntry> parse_process_maps(const std::string& text) {
  // "55d4c0a00000-55d4c0a01000 r-xp 00001000 fe:01 1835023   /usr/bin/x (deleted)"
  std::vector<MapsEntry> out;
  std::string_view all(text);
  while (!all.empty()) {
    auto nl = all.find('\n');
    std::string_view line = all.substr(0, nl);
    all.remove_prefix(nl == std::string_view::npos ? all.size() : nl + 1);
    MapsEntry e{};
    std::uint64_t major = 0, minor = 0;
    if (!take_hex(line, &e.start, '-') || !take_hex(line, &e.end, ' ')) continue;
    std::string_view perms = take_field(line);
    e.executable = perms.size() >= 3 && perms[2] == 'x';
    if (!take_hex(line, &e.offset, ' ') || !take_hex(line, &major, ':') ||
        !take_hex(line, &minor, ' '))
      continue;
    e.dev_major = static_cast<std::uint32_t>(major);
    e.dev_minor = static_cast<std::uint32_t>(minor);
    auto [p, ec] = std::from_chars(line.data(), line.data() + line.size(), e.inode, 10);
    if (ec != std::errc()) continue;
    line.remove_prefix(static_cast<std::size_t>(p - line.data()));
    while (!line.empty() && line.front() == ' ') line.remove_prefix(1);
    if (line.size() > kDeletedSuffix.size() && line.ends_with(kDeletedSuffix)) {
      e.deleted = true;
      line.remove_suffix(kDeletedSuffix.size());
    }
    e.path = std::string(line);
    out.push_back(std::move(e));
  }
  std::sort(out.begin(), out.end(),
            [](const MapsEntry& a, const MapsEntry& b) { return a.start < b.start; });
  return out;
}

std::uint64_t exe_identity(const std::string& proc_dir) {
  struct stat st {};
  if (::stat((proc_dir + "/exe").c_str(), &st) != 0) return 0;
  return (static_cast<std::uint64_t>(st.st_dev) << 40) ^ static_cast<std::uint64_t>(st.st_ino);
}

bool mapped_identity(const std::string& path, std::uint32_t* dev_major, std::uint32_t* dev_minor,
                     std::uint64_t* inode) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return false;
  const long page = ::sysconf(_SC_PAGESIZE);
  void* at = ::mmap(nullptr, static_cast<std::size_t>(page), PROT_READ, MAP_PRIVATE, fd, 0);
  ::close(fd);
  if (at == MAP_FAILED) return false;
  std::vector<MapsEntry> self;
  int err = 0;
  bool found = false;
  if (read_process_maps("/proc", static_cast<std::uint32_t>(::getpid()), &self, &err)) {
    const auto addr = reinterpret_cast<std::uint64_t>(at);
    for (const MapsEntry& m : self) {
      if (addr < m.start || addr >= m.end) continue;
      *dev_major = m.dev_major;
      *dev_minor = m.dev_minor;
      *inode = m.inode;
      found = true;
      break;
    }
  }
  ::munmap(at, static_cast<std::size_t>(page));
  return found;
}

bool read_process_maps(const std::string& proc_root, std::uint32_t pid, std::vector<MapsEntry>* out,
                       int* err) {
  std::string path = proc_root + "/" + std::to_string(pid) + "/maps";
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    *err = errno;
    return false;
  }
  std::string text;
  char buf[16384];
  for (;;) {
    ssize_t n = ::read(fd, buf, sizeof(buf));
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      *err = errno;  // ESRCH when the process exits while we read
      ::close(fd);
      return false;
    }
    if (n == 0) break;
    text.append(buf, static_cast<std::size_t>(n));
  }
  ::close(fd);
  // A zombie or kernel thread has an empty maps file: read, with nothing in it (a kernel
  // thread read as "gone" was read again at every tick of a system-wide session).
  *out = parse_process_maps(text);
  return true;
}

}  // namespace loupe
