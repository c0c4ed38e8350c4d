// SPDX-License-Identifier: Apache-2.0
//
// Record/replay of raw ring records (`loupe run --record FILE`, `loupe replay FILE PROFILE`).
//
// Format (host byte order, little-endian on every machine loupe runs on; version 1):
//   "LOUPECAP" | u32 format version | u32 ring count
//   per ring:  u16 len + instance name | u16 len + ring name | u16 record type
//              | u16 record version | u32 min_len | u32 max_len
//   records:   u32 ring index | u32 len | u64 CLOCK_MONOTONIC ns when read | len bytes
// Records are written exactly as the kernel ring handed them, before the header checks,
// so a replay reproduces malformed counts as well as decoded records.
#ifndef LOUPE_DISPATCH_CAPTURE_FILE_HPP
#define LOUPE_DISPATCH_CAPTURE_FILE_HPP

#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

namespace loupe {

struct CaptureRing {
  std::string instance;  // the plugin instance name in the profile ("latency", "latency#2")
  std::string ring;
  std::uint16_t record_type = 0;
  std::uint16_t record_version = 0;
  std::uint32_t min_len = 0;
  std::uint32_t max_len = 0;
};

class CaptureWriter {
 public:
  // Throws std::runtime_error with the path and reason.
  CaptureWriter(const std::string& path, const std::vector<CaptureRing>& rings);
  ~CaptureWriter();
  CaptureWriter(const CaptureWriter&) = delete;
  CaptureWriter& operator=(const CaptureWriter&) = delete;

  // Reader thread only. Buffered; a write error is remembered and reported by close().
  void append(std::uint32_t ring, const void* data, std::uint32_t len, std::uint64_t read_ns);
  // Empty on success, else the error text.
  std::string close();
  std::uint64_t records() const { return records_; }

 private:
  std::FILE* f_ = nullptr;
  std::string path_;
  std::uint64_t records_ = 0;
  bool failed_ = false;
};

class CaptureReader {
 public:
  struct Record {
    std::uint32_t ring;
    std::uint64_t read_ns;
    std::vector<std::uint8_t> bytes;
  };
  // Throws std::runtime_error naming the file and what is wrong with it.
  explicit CaptureReader(const std::string& path);
  ~CaptureReader();
  CaptureReader(const CaptureReader&) = delete;
  CaptureReader& operator=(const CaptureReader&) = delete;

  const std::vector<CaptureRing>& rings() const { return rings_; }
  // False at the end; throws on a truncated or corrupt record.
  bool next(Record* out);

 private:
  std::FILE* f_ = nullptr;
  std::string path_;
  std::vector<CaptureRing> rings_;
  std::uint64_t index_ = 0;
};

}  // namespace loupe

#endif  // LOUPE_DISPATCH_CAPTURE_FILE_HPP
