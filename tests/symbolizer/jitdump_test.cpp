// SPDX-License-Identifier: Apache-2.0
//
// JIT frames from jitdump files: a live process that logs its code the way runtimes do
// (tests/symbolizer/jit_target.c), resolved through the public symbolizer while the test
// appends moves, loads and half-written records; and the reader on files of crafted bytes
// (byte order, bounds, garbage), which the profiled program controls.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "live_target.hpp"
#include "loupe/symbolizer.hpp"
#include "symbols/jitdump.hpp"

namespace loupe {
namespace {

using test::LiveTarget;
namespace fs = std::filesystem;

std::string str(const char* s) {
  return s ? s : "(null)";
}

loupe_frame user_frame(Symbolizer& sym, std::uint32_t pid, std::uint64_t addr) {
  loupe_frame f{};
  sym.symbolize(pid, LOUPE_FRAME_USER, &addr, 1, &f);
  return f;
}

// Builds jitdump bytes as perf's jitdump.h lays them out, in either byte order.
class DumpBytes {
 public:
  explicit DumpBytes(bool swapped = false) : swapped_(swapped) {}

  DumpBytes& header(std::uint32_t magic = 0x4A695444) {
    u32(magic);
    u32(1), u32(40), u32(62), u32(0), u32(static_cast<std::uint32_t>(::getpid()));
    u64(1), u64(0);
    return *this;
  }
  DumpBytes& load(std::uint64_t addr, std::uint64_t size, const std::string& name,
                  std::size_t code_bytes = 16) {
    prefix(0, static_cast<std::uint32_t>(56 + name.size() + 1 + code_bytes));
    u32(1), u32(1), u64(addr), u64(addr), u64(size), u64(0);
    bytes_.insert(bytes_.end(), name.begin(), name.end());
    bytes_.push_back(0);
    bytes_.insert(bytes_.end(), code_bytes, 0xc3);
    return *this;
  }
  DumpBytes& move(std::uint64_t from, std::uint64_t to, std::uint64_t size) {
    prefix(1, 64);
    u32(1), u32(1), u64(to), u64(from), u64(to), u64(size), u64(0);
    return *this;
  }
  DumpBytes& record(std::uint32_t id, std::uint32_t total) {
    prefix(id, total);
    bytes_.insert(bytes_.end(), total > 16 ? total - 16 : 0, 0xab);
    return *this;
  }
  DumpBytes& raw(const std::vector<std::uint8_t>& b) {
    bytes_.insert(bytes_.end(), b.begin(), b.end());
    return *this;
  }
  const std::vector<std::uint8_t>& bytes() const { return bytes_; }

 private:
  void prefix(std::uint32_t id, std::uint32_t total) { u32(id), u32(total), u64(2); }
  void u32(std::uint32_t v) {
    if (swapped_) v = __builtin_bswap32(v);
    append(&v, sizeof(v));
  }
  void u64(std::uint64_t v) {
    if (swapped_) v = __builtin_bswap64(v);
    append(&v, sizeof(v));
  }
  void append(const void* p, std::size_t n) {
    auto* b = static_cast<const std::uint8_t*>(p);
    bytes_.insert(bytes_.end(), b, b + n);
  }
  bool swapped_;
  std::vector<std::uint8_t> bytes_;
};

void append_file(const std::string& path, const std::vector<std::uint8_t>& bytes,
                 std::size_t from = 0, std::size_t to = SIZE_MAX) {
  std::ofstream out(path, std::ios::binary | std::ios::app);
  to = std::min(to, bytes.size());
  out.write(reinterpret_cast<const char*>(bytes.data() + from),
            static_cast<std::streamsize>(to - from));
}

// Removes the dump the target wrote (and a scratch directory) at scope exit.
class Cleanup {
 public:
  explicit Cleanup(std::string path) : path_(std::move(path)) {}
  ~Cleanup() {
    std::error_code ec;
    fs::remove_all(path_, ec);
  }

 private:
  std::string path_;
};

void expect_jit(const loupe_frame& f, const std::string& name, std::uint64_t offset) {
  EXPECT_EQ(f.resolution, static_cast<std::uint32_t>(LOUPE_RESOLVED_JITDUMP)) << name;
  EXPECT_EQ(f.kind, static_cast<std::uint32_t>(LOUPE_FRAME_JIT)) << name;
  EXPECT_EQ(str(f.symbol), name);
  EXPECT_EQ(f.offset, offset) << name;
}

TEST(SymbolizerJitdump, LiveProcessLoadsMovesGrowsAndHalfWrittenRecords) {
  LiveTarget t(LOUPE_JIT_TARGET);
  std::string path = "/tmp/jit-" + std::to_string(t.pid()) + ".dump";
  Cleanup cleanup(path);
  std::uint64_t hot = t.addr("jd_hot_function");
  std::uint64_t region = t.addr("jit_region");
  auto sym = make_symbolizer();

  loupe_frame f = user_frame(*sym, t.pid(), hot + 4);
  expect_jit(f, "jd_hot_function", 4);
  EXPECT_EQ(str(f.module), path);
  EXPECT_EQ(f.address, hot + 4);
  // Past its 64 bytes: anonymous memory without a name.
  f = user_frame(*sym, t.pid(), hot + 64);
  EXPECT_EQ(f.resolution, static_cast<std::uint32_t>(LOUPE_UNRESOLVED_NO_SYMBOL));
  EXPECT_EQ(f.kind, static_cast<std::uint32_t>(LOUPE_FRAME_USER));

  // The runtime moves the code: the name follows it, the old place is empty.
  append_file(path, DumpBytes().move(hot, region + 0x1000, 64).bytes());
  expect_jit(user_frame(*sym, t.pid(), region + 0x1008), "jd_hot_function", 8);
  EXPECT_EQ(user_frame(*sym, t.pid(), hot + 4).resolution,
            static_cast<std::uint32_t>(LOUPE_UNRESOLVED_NO_SYMBOL));

  // Growth is read from where the last read stopped.
  append_file(path, DumpBytes().load(region + 0x2000, 0x80, "jd_second_function").bytes());
  expect_jit(user_frame(*sym, t.pid(), region + 0x2010), "jd_second_function", 0x10);

  // A record caught half written resolves nothing new, breaks nothing, and is read whole
  // once the runtime finishes it.
  std::vector<std::uint8_t> late =
      DumpBytes().load(region + 0x3000, 0x40, "jd_late_function", 40).bytes();
  append_file(path, late, 0, 30);
  EXPECT_EQ(user_frame(*sym, t.pid(), region + 0x3000).resolution,
            static_cast<std::uint32_t>(LOUPE_UNRESOLVED_NO_SYMBOL));
  expect_jit(user_frame(*sym, t.pid(), region + 0x2000), "jd_second_function", 0);
  append_file(path, late, 30);
  expect_jit(user_frame(*sym, t.pid(), region + 0x3001), "jd_late_function", 1);

  SymbolizerStats s = sym->stats();
  EXPECT_EQ(s.jitdump_entries, 3u);
  EXPECT_EQ(s.jitdump_evictions, 0u);
}

TEST(SymbolizerJitdump, FileFoundThroughTheProcessMappings) {
  // Not /tmp/jit-PID.dump: only the runtime's mapping of the file says where it is.
  char dir_template[] = "/tmp/loupe-jd-XXXXXX";
  ASSERT_NE(::mkdtemp(dir_template), nullptr);
  std::string dir = dir_template;
  Cleanup cleanup(dir);
  ::setenv("LOUPE_JD_DIR", dir.c_str(), 1);
  LiveTarget t(LOUPE_JIT_TARGET);
  ::unsetenv("LOUPE_JD_DIR");
  std::string path = dir + "/jit-" + std::to_string(t.pid()) + ".dump";
  ASSERT_TRUE(fs::exists(path));
  ASSERT_FALSE(fs::exists("/tmp/jit-" + std::to_string(t.pid()) + ".dump"));

  auto sym = make_symbolizer();
  loupe_frame f = user_frame(*sym, t.pid(), t.addr("jd_hot_function"));
  expect_jit(f, "jd_hot_function", 0);
  EXPECT_EQ(str(f.module), path);
}

TEST(SymbolizerJitdump, GarbageDumpLeavesFramesUnresolved) {
  LiveTarget t(LOUPE_JIT_TARGET);
  std::string path = "/tmp/jit-" + std::to_string(t.pid()) + ".dump";
  Cleanup cleanup(path);
  // Replace the file with one that is not jitdump (a new inode: read from scratch).
  fs::remove(path);
  append_file(path,
              DumpBytes().header(0x12345678).load(t.addr("jd_hot_function"), 64, "x").bytes());
  auto sym = make_symbolizer();
  loupe_frame f = user_frame(*sym, t.pid(), t.addr("jd_hot_function"));
  EXPECT_EQ(f.resolution, static_cast<std::uint32_t>(LOUPE_UNRESOLVED_NO_SYMBOL));
}

// The reader on its own, over files of crafted bytes.
class DumpFile {
 public:
  DumpFile() {
    char tmpl[] = "/tmp/loupe-jdfile-XXXXXX";
    int fd = ::mkstemp(tmpl);
    if (fd >= 0) ::close(fd);
    path_ = tmpl;
  }
  ~DumpFile() { std::remove(path_.c_str()); }
  const std::string& path() const { return path_; }
  void append(const DumpBytes& d, std::size_t from = 0, std::size_t to = SIZE_MAX) {
    append_file(path_, d.bytes(), from, to);
  }
  void replace(const DumpBytes& d) {
    std::remove(path_.c_str());
    append(d);
  }

 private:
  std::string path_;
};

std::string name_at(const JitDump& dump, std::uint64_t addr, std::uint64_t* offset = nullptr) {
  JitDump::Hit hit{};
  if (!dump.lookup(addr, &hit)) return "(none)";
  if (offset) *offset = hit.offset;
  return std::string(hit.name);
}

TEST(SymbolizerJitdump, ReadsTheOtherByteOrder) {
  DumpFile file;
  file.append(
      DumpBytes(/*swapped=*/true).header().load(0x1000, 0x20, "be_fn").move(0x1000, 0x5000, 0x20));
  JitDump dump(file.path());
  ASSERT_TRUE(dump.refresh());
  EXPECT_FALSE(dump.broken());
  std::uint64_t off = 0;
  EXPECT_EQ(name_at(dump, 0x5004, &off), "be_fn");
  EXPECT_EQ(off, 4u);
  EXPECT_EQ(name_at(dump, 0x1000), "(none)");
}

TEST(SymbolizerJitdump, BoundedOldestLoadsEvictedAndCounted) {
  DumpFile file;
  DumpBytes d;
  d.header();
  for (int i = 0; i < 10; ++i) d.load(0x10000 + 0x100 * i, 0x80, "fn" + std::to_string(i));
  file.append(d);
  JitDump dump(file.path(), /*max_entries=*/4);
  ASSERT_TRUE(dump.refresh());
  EXPECT_EQ(dump.size(), 4u);
  EXPECT_EQ(dump.evictions(), 6u);
  EXPECT_EQ(dump.records(), 10u);
  EXPECT_EQ(name_at(dump, 0x10000), "(none)");
  EXPECT_EQ(name_at(dump, 0x10500), "(none)");
  EXPECT_EQ(name_at(dump, 0x10600), "fn6");
  EXPECT_EQ(name_at(dump, 0x10940), "fn9");
}

TEST(SymbolizerJitdump, NewCodeReplacesWhatItOverlaps) {
  DumpFile file;
  file.append(DumpBytes()
                  .header()
                  .load(0x1000, 0x100, "old_big")
                  .load(0x2000, 0x10, "kept")
                  .load(0x1080, 0x10, "new_small"));
  JitDump dump(file.path());
  ASSERT_TRUE(dump.refresh());
  EXPECT_EQ(name_at(dump, 0x1010), "(none)");
  EXPECT_EQ(name_at(dump, 0x1084), "new_small");
  EXPECT_EQ(name_at(dump, 0x2000), "kept");
  EXPECT_EQ(dump.size(), 2u);
}

TEST(SymbolizerJitdump, SkipsUnknownAndMalformedRecordsStopsOnBrokenFraming) {
  DumpFile file;
  std::string long_name(5000, 'n');
  file.append(DumpBytes()
                  .header()
                  .record(2, 64)   // debug info
                  .record(4, 40)   // unwinding info
                  .record(99, 24)  // an id from a later version
                  .record(0, 30)   // a load too short for its fields: skipped
                  .record(1, 20)   // a move too short for its fields: skipped
                  .load(0x3000, 0x10, long_name)
                  .load(0x4000, 0x10, "good")
                  .record(0, 8)  // total_size below the prefix: the framing is lost
                  .load(0x5000, 0x10, "after_garbage"));
  JitDump dump(file.path());
  ASSERT_TRUE(dump.refresh());
  EXPECT_TRUE(dump.broken());
  EXPECT_EQ(name_at(dump, 0x4000), "good");
  EXPECT_EQ(name_at(dump, 0x3000), std::string(JitDump::kMaxNameLength, 'n'));
  EXPECT_EQ(name_at(dump, 0x5000), "(none)");
  // Broken stays broken while the file is the same...
  file.append(DumpBytes().load(0x6000, 0x10, "more"));
  ASSERT_TRUE(dump.refresh());
  EXPECT_EQ(name_at(dump, 0x6000), "(none)");
  // ...and a replaced file is read from scratch.
  file.replace(DumpBytes().header().load(0x7000, 0x10, "fresh"));
  ASSERT_TRUE(dump.refresh());
  EXPECT_FALSE(dump.broken());
  EXPECT_EQ(name_at(dump, 0x7000), "fresh");
  EXPECT_EQ(name_at(dump, 0x4000), "(none)");
}

TEST(SymbolizerJitdump, NameWithoutItsNulIsRejected) {
  DumpFile file;
  DumpBytes d;
  d.header().load(0x1000, 0x10, "ok", /*code_bytes=*/0);
  // A load whose name runs to the end of the record.
  std::vector<std::uint8_t> rec = DumpBytes().load(0x2000, 0x10, "abc", 0).bytes();
  rec.pop_back();  // drop the NUL...
  rec[4] -= 1;     // ...and count it out of total_size
  d.raw(rec);
  file.append(d);
  JitDump dump(file.path());
  ASSERT_TRUE(dump.refresh());
  EXPECT_FALSE(dump.broken());
  EXPECT_EQ(name_at(dump, 0x1000), "ok");
  EXPECT_EQ(name_at(dump, 0x2000), "(none)");
  EXPECT_EQ(dump.offset(), d.bytes().size());
}

TEST(SymbolizerJitdump, HalfWrittenHeaderWaits) {
  DumpFile file;
  DumpBytes d;
  d.header().load(0x1000, 0x10, "f");
  file.append(d, 0, 20);
  JitDump dump(file.path());
  ASSERT_TRUE(dump.refresh());
  EXPECT_FALSE(dump.broken());
  EXPECT_EQ(dump.size(), 0u);
  file.append(d, 20);
  ASSERT_TRUE(dump.refresh());
  EXPECT_EQ(name_at(dump, 0x1008), "f");
  EXPECT_FALSE(JitDump("/nonexistent/jit-1.dump").refresh());
}

}  // namespace
}  // namespace loupe
