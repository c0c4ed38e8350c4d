// SPDX-License-Identifier: Apache-2.0
//
// The records file reader and folded frame names on files and frames written here (the
// sinks' and `loupe diff`'s tests run them on real records): a file or the directory
// holding it, blank lines skipped, the first bad line named; a frame read back from a
// record is named exactly as the live frame it was written from.
#include <gtest/gtest.h>

#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "loupe/report/folded_frame.hpp"
#include "loupe/report/frame_name.hpp"
#include "loupe/report/records_file.hpp"
#include "sample_records.hpp"

namespace {

using loupe::report::RecordsFileError;
using nlohmann::json;

std::string folded(const loupe_frame& f) {
  std::string s;
  loupe::report::append_folded_frame(f, s);
  return s;
}

TEST(RecordsFile, ReadsAFileOrTheDirectoryHoldingItAndSkipsBlankLines) {
  loupe::test::TempDir dir;
  std::ofstream(dir.file("records.jsonl")) << R"({"kind":"stack"})"
                                           << "\n\n"
                                           << R"({"kind":"metric"})"
                                           << "\n";
  for (const std::string& where : {dir.path(), dir.file("records.jsonl")}) {
    std::vector<std::string> kinds;
    const RecordsFileError err = loupe::report::for_each_record(
        where, [&](const json& r) { kinds.push_back(loupe::report::text_field(r, "kind")); });
    EXPECT_FALSE(err) << err.what;
    EXPECT_EQ(kinds, (std::vector<std::string>{"stack", "metric"}));
  }
}

TEST(RecordsFile, SaysWhichLineIsNotARecordAndWhenNothingCanBeRead) {
  loupe::test::TempDir dir;
  std::ofstream(dir.file("records.jsonl")) << R"({"kind":"stack"})"
                                           << "\n\n{oops\n";
  RecordsFileError err = loupe::report::for_each_record(dir.path(), [](const json&) {});
  EXPECT_EQ(err.kind, RecordsFileError::kNotARecord);
  EXPECT_EQ(err.line, 3u);
  EXPECT_EQ(err.path, dir.file("records.jsonl"));

  // A JSON type error thrown while reading a record names its line too.
  err = loupe::report::for_each_record(dir.path(),
                                       [](const json& r) { (void)r.at("absent").get<int>(); });
  EXPECT_EQ(err.kind, RecordsFileError::kNotARecord);
  EXPECT_EQ(err.line, 1u);

  err = loupe::report::for_each_record(dir.file("none.jsonl"), [](const json&) {});
  EXPECT_EQ(err.kind, RecordsFileError::kUnreadable);
}

TEST(RecordsFile, NullAndMissingFieldsFallBack) {
  const json r = json::parse(R"({"name":null,"unit":"ns","value":null,"count":3})");
  EXPECT_EQ(loupe::report::text_field(r, "name", "?"), "?");
  EXPECT_EQ(loupe::report::text_field(r, "unit"), "ns");
  EXPECT_EQ(loupe::report::text_field(r, "absent"), "");
  EXPECT_EQ(loupe::report::number_field(r, "value", -1), -1);
  EXPECT_EQ(loupe::report::number_field(r, "count"), 3);
  EXPECT_EQ(loupe::report::number_field(json::array(), "count", 7), 7);
}

// What the jsonl sink writes for a frame (docs/records.md) and the live frame it came from.
TEST(FoldedFrame, AFrameReadBackIsNamedAsTheLiveFrame) {
  struct Case {
    loupe_frame live;
    const char* json_text;
    const char* name;
  };
  const Case cases[] = {
      {{0x1000, "main", "/usr/bin/app", 4, LOUPE_FRAME_USER, LOUPE_RESOLVED_SYMTAB},
       R"({"address":4096,"symbol":"main","module":"/usr/bin/app","offset":4,"kind":"user"})",
       "main"},
      {{0x1040, nullptr, "/usr/lib/libc.so.6", 64, LOUPE_FRAME_USER, LOUPE_UNRESOLVED_NO_SYMBOL},
       R"({"address":4160,"symbol":null,"module":"/usr/lib/libc.so.6","offset":64,"kind":"user"})",
       "libc.so.6+0x40"},
      {{7, nullptr, nullptr, 7, LOUPE_FRAME_USER, LOUPE_UNRESOLVED_NO_MODULE},
       R"({"address":7,"symbol":null,"module":null,"offset":7,"kind":"user"})",
       "[unknown]"},
      {{0xffff, "do_sys;open\n", "[kernel]", 0, LOUPE_FRAME_KERNEL, LOUPE_RESOLVED_KALLSYMS},
       R"({"address":65535,"symbol":"do_sys;open\n","module":"[kernel]","kind":"kernel"})",
       "do_sys:open _[k]"},
      {{0x7f00, "jitted", "[jit]", 0, LOUPE_FRAME_JIT, LOUPE_RESOLVED_PERF_MAP},
       R"({"address":32512,"symbol":"jitted","module":"[jit]","kind":"jit"})",
       "jitted_[j]"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.json_text);
    const json j = json::parse(c.json_text);
    EXPECT_EQ(folded(c.live), c.name);
    EXPECT_EQ(folded(loupe::report::frame_from_json(j)), c.name);
  }
}

// The one name every report gives a frame (folded adds its marks and escapes on top).
TEST(FrameName, ModulesByFileNameAndUnknownsSaidSo) {
  using loupe::report::frame_name;
  EXPECT_EQ(frame_name({1, "", "/usr/lib/x86_64-linux-gnu/libc.so.6", 0x1a2b, LOUPE_FRAME_USER,
                        LOUPE_UNRESOLVED_NO_SYMBOL}),
            "libc.so.6+0x1a2b");
  EXPECT_EQ(
      frame_name({1, nullptr, "[kernel]", 0x10, LOUPE_FRAME_KERNEL, LOUPE_UNRESOLVED_NO_SYMBOL}),
      "[kernel]+0x10");
  // A path ending in '/' keeps its whole text: an empty name would hide the frame.
  EXPECT_EQ(frame_name({1, nullptr, "/odd/", 1, LOUPE_FRAME_USER, LOUPE_UNRESOLVED_NO_SYMBOL}),
            "/odd/+0x1");
  EXPECT_EQ(
      frame_name({1, "do_sys;open", "[kernel]", 0, LOUPE_FRAME_KERNEL, LOUPE_RESOLVED_KALLSYMS}),
      "do_sys;open");
  EXPECT_EQ(frame_name({1, nullptr, "", 0, LOUPE_FRAME_USER, LOUPE_UNRESOLVED_NO_MODULE}),
            "[unknown]");
}

}  // namespace
