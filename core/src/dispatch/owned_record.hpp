// SPDX-License-Identifier: Apache-2.0
//
// A deep copy of a loupe_record that owns every string and array it points to. Built once
// from a plugin's borrowed record (with the host's additions: plugin name, window,
// percentiles), immutable afterwards, and shared by every sink queue without copying.
#ifndef LOUPE_DISPATCH_OWNED_RECORD_HPP
#define LOUPE_DISPATCH_OWNED_RECORD_HPP

#include <deque>
#include <memory>
#include <string>
#include <vector>

#include "loupe/abi/records.h"

namespace loupe {

class OwnedRecord {
 public:
  // Copies `src`; `plugin` overrides src.plugin; zero windows take the given defaults.
  OwnedRecord(const loupe_record& src, const std::string& plugin, std::uint64_t window_start_ns,
              std::uint64_t window_end_ns);
  OwnedRecord(const OwnedRecord&) = delete;
  OwnedRecord& operator=(const OwnedRecord&) = delete;

  const loupe_record& view() const { return rec_; }

 private:
  const char* keep(const char* s);
  void copy_frames(const loupe_frame* frames, std::uint32_t n);
  void copy_fields(const loupe_field* fields, std::uint32_t n);

  loupe_record rec_{};
  std::deque<std::string> strings_;
  std::vector<loupe_label> labels_;
  std::vector<loupe_bucket> buckets_;
  std::vector<loupe_percentile> percentiles_;
  std::vector<loupe_frame> frames_;
  std::vector<loupe_value> values_;
  std::vector<loupe_field> fields_;
  loupe_histogram hist_{};
  loupe_stack_sample stack_{};
  loupe_event event_{};
  loupe_metric metric_{};
  loupe_health health_{};
  loupe_finding finding_{};
};

using RecordPtr = std::shared_ptr<const OwnedRecord>;

// p50..p99.9 from bucket bounds: the value interpolates linearly inside the bucket that
// holds the rank, clamped to [min, max]; [lower, upper) is that bucket: the error bound.
std::vector<loupe_percentile> compute_percentiles(const loupe_bucket* buckets, std::uint32_t n,
                                                  std::uint64_t min, std::uint64_t max);

// Returns an error text when `rec` is not a well-formed record (kind without payload,
// NULL name, ...), else empty.
std::string check_record(const loupe_record& rec);

}  // namespace loupe

#endif  // LOUPE_DISPATCH_OWNED_RECORD_HPP
