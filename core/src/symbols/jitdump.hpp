// SPDX-License-Identifier: Apache-2.0
//
// A JIT's code log in perf's jitdump format (jit-PID.dump, written by V8 --perf-prof, the
// JVM's perf agent, .NET, Wasmtime...): a header, then records that load code at an
// address under a name, move it, and close the file. The runtime appends while it runs, so
// the file is read incrementally from where the last read stopped. It is written by the
// profiled program: every length is checked against the record and the file, a half
// written record waits for the next read, and garbage stops the reading of that file.
#ifndef LOUPE_SYMBOLS_JITDUMP_HPP
#define LOUPE_SYMBOLS_JITDUMP_HPP

#include <sys/types.h>

#include <cstdint>
#include <list>
#include <map>
#include <string>
#include <string_view>
#include <vector>

namespace loupe {

class JitDump {
 public:
  static constexpr std::size_t kDefaultMaxEntries = 65536;
  // Longer names are cut: a name is a label in a report, not a payload.
  static constexpr std::size_t kMaxNameLength = 1024;

  explicit JitDump(std::string path, std::size_t max_entries = kDefaultMaxEntries)
      : path_(std::move(path)), max_entries_(max_entries == 0 ? 1 : max_entries) {}

  // Reads the records appended since the last call; starts over when the file was replaced
  // or shrank. Returns false when the file is absent (what was read stays known).
  bool refresh();

  struct Hit {
    std::string_view name;  // valid until the next refresh()
    std::uint64_t offset;
    // The owner's interned copy of the name, cached per entry while the entry lives.
    const char** interned;
  };
  bool lookup(std::uint64_t addr, Hit* hit) const;

  const std::string& path() const { return path_; }
  std::size_t size() const { return entries_.size(); }
  // Records applied (loads and moves), and entries evicted to stay within max_entries.
  std::uint64_t records() const { return records_; }
  std::uint64_t evictions() const { return evictions_; }
  // The file's content is not jitdump (bad magic, impossible record size): no more reads
  // until the file is replaced.
  bool broken() const { return broken_; }
  // Bytes of the file consumed: the next read starts here.
  std::uint64_t offset() const { return offset_; }

 private:
  struct Entry {
    std::uint64_t size;
    std::string name;
    std::list<std::uint64_t>::iterator age;  // position in load order
    mutable const char* interned = nullptr;
  };
  void reset();
  void parse(int fd, std::uint64_t file_size);
  // Returns false to stop: the record is incomplete (wait) or garbage (broken_ is set).
  bool parse_record(int fd, std::uint64_t file_size);
  bool read_at(int fd, std::uint64_t off, std::size_t len, std::uint64_t file_size,
               const std::uint8_t** out);
  void load(std::uint64_t addr, std::uint64_t size, std::string name);
  void move(std::uint64_t from, std::uint64_t to, std::uint64_t size);
  // Drops every entry overlapping [addr, addr + size): that code was replaced.
  void erase_overlapping(std::uint64_t addr, std::uint64_t size);
  void erase(std::map<std::uint64_t, Entry>::iterator it);

  std::string path_;
  const std::size_t max_entries_;
  bool have_file_ = false;
  bool have_header_ = false;
  bool swapped_ = false;  // written on a machine of the other byte order
  bool broken_ = false;
  dev_t dev_ = 0;
  ino_t ino_ = 0;
  std::uint64_t offset_ = 0;
  std::uint64_t seen_size_ = 0;  // file size at the last read: unchanged means nothing new
  std::uint64_t records_ = 0;
  std::uint64_t evictions_ = 0;
  std::map<std::uint64_t, Entry> entries_;  // by start; never overlapping
  std::list<std::uint64_t> order_;          // starts, oldest load first
  // Read buffer: a window of the file, so a run of small records costs one read.
  std::vector<std::uint8_t> buf_;
  std::uint64_t buf_off_ = 0;
};

}  // namespace loupe

#endif  // LOUPE_SYMBOLS_JITDUMP_HPP
