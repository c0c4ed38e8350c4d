// SPDX-License-Identifier: Apache-2.0
#include "symbols/perf_map.hpp"

#include <sys/stat.h>

#include <algorithm>
#include <charconv>
#include <fstream>
#include <sstream>

namespace loupe {
namespace {

bool parse_hex(std::string_view& s, std::uint64_t* out) {
  while (!s.empty() && s.front() == ' ') s.remove_prefix(1);
  if (s.size() > 2 && s[0] == '0' && (s[1] == 'x' || s[1] == 'X')) s.remove_prefix(2);
  auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), *out, 16);
  if (ec != std::errc() || p == s.data()) return false;
  s.remove_prefix(static_cast<std::size_t>(p - s.data()));
  return true;
}

}  // namespace

std::uint32_t namespace_pid(std::uint32_t pid, const std::string& proc_dir) {
  std::ifstream in(proc_dir + "/status");
  std::string line;
  while (std::getline(in, line)) {
    if (!line.starts_with("NSpid:")) continue;
    auto last = line.find_last_of(" \t");
    std::uint32_t ns = 0;
    auto [p, ec] = std::from_chars(line.data() + last + 1, line.data() + line.size(), ns);
    return ec == std::errc() && ns ? ns : pid;
  }
  return pid;
}

PerfMapLocation locate_perf_map(std::uint32_t pid, const std::string& proc_dir,
                                const std::string& dir) {
  const std::string inside = proc_dir + "/root" + dir;
  struct stat theirs {
  }, ours{};
  if (::stat(inside.c_str(), &theirs) != 0)
    return {dir + "/perf-" + std::to_string(pid) + ".map", {}};
  const std::string name = dir + "/perf-" + std::to_string(namespace_pid(pid, proc_dir)) + ".map";
  // A container's /tmp, or a service's PrivateTmp=yes, is another directory than ours.
  if (::stat(dir.c_str(), &ours) == 0 && ours.st_dev == theirs.st_dev &&
      ours.st_ino == theirs.st_ino)
    return {name, name};
  return {proc_dir + "/root" + name, name};
}

bool PerfMap::refresh() {
  struct stat st {};
  if (::stat(path_.c_str(), &st) != 0) {
    present_ = false;
    entries_.clear();
    names_.clear();
    file_size_ = -1;
    return false;
  }
  if (present_ && st.st_size == file_size_ && st.st_mtim.tv_sec == mtime_.tv_sec &&
      st.st_mtim.tv_nsec == mtime_.tv_nsec)
    return true;
  std::ifstream in(path_);
  if (!in) return present_ = false;
  std::stringstream ss;
  ss << in.rdbuf();
  parse(ss.str());
  present_ = true;
  file_size_ = st.st_size;
  mtime_ = st.st_mtim;
  return true;
}

void PerfMap::parse(const std::string& text) {
  entries_.clear();
  names_.clear();
  std::uint32_t line_no = 0;
  std::string_view all(text);
  while (!all.empty()) {
    auto nl = all.find('\n');
    std::string_view line = all.substr(0, nl);
    all.remove_prefix(nl == std::string_view::npos ? all.size() : nl + 1);
    ++line_no;
    std::uint64_t start = 0, size = 0;
    if (!parse_hex(line, &start) || !parse_hex(line, &size) || line.empty() || line[0] != ' ')
      continue;  // a malformed or half-written last line
    while (!line.empty() && line.front() == ' ') line.remove_prefix(1);
    line = line.substr(0, line.find('\0'));  // names are C strings from here on
    while (!line.empty() && (line.back() == '\r' || line.back() == ' ')) line.remove_suffix(1);
    if (line.empty() || size == 0) continue;
    auto off = static_cast<std::uint32_t>(names_.size());
    names_.append(line);
    names_.push_back('\0');
    entries_.push_back({start, size, off, line_no, nullptr});
  }
  std::sort(entries_.begin(), entries_.end(), [](const Entry& a, const Entry& b) {
    return a.start != b.start ? a.start < b.start : a.line > b.line;
  });
}

bool PerfMap::lookup(std::uint64_t addr, Hit* hit) const {
  auto it = std::upper_bound(entries_.begin(), entries_.end(), addr,
                             [](std::uint64_t a, const Entry& e) { return a < e.start; });
  // Entries may overlap (recompiled code); among those covering addr the latest line wins.
  const Entry* best = nullptr;
  for (int walked = 0; it != entries_.begin() && walked < 16; ++walked) {
    --it;
    if (addr - it->start < it->size && (!best || it->line > best->line)) best = &*it;
  }
  if (!best) return false;
  hit->name = std::string_view(names_.data() + best->name);
  hit->offset = addr - best->start;
  hit->interned = &best->interned;
  return true;
}

}  // namespace loupe
