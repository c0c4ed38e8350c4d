// SPDX-License-Identifier: Apache-2.0
#ifndef LOUPE_SINKS_CONSOLE_RECORD_COPY_HPP
#define LOUPE_SINKS_CONSOLE_RECORD_COPY_HPP

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <variant>
#include <vector>

#include "loupe/abi/records.h"

namespace loupe::sinks {

// Owned copies of the parts of a record the report needs: consume() only borrows the
// record, and the report is rendered later at flush().

using Labels = std::vector<std::pair<std::string, std::string>>;

struct FrameCopy {
  std::uint64_t address = 0;
  std::optional<std::string> symbol;
  std::optional<std::string> module;
  std::uint64_t offset = 0;
  std::uint32_t kind = 0;  // loupe_frame_kind
};

struct HistogramCopy {
  std::uint32_t scheme = 0;
  std::uint32_t sub_buckets = 0;
  std::string unit;
  std::vector<loupe_bucket> buckets;
  std::uint64_t count = 0, sum = 0, min = 0, max = 0;
  std::vector<loupe_percentile> percentiles;
};

struct ValueCopy {
  std::string name;
  std::string unit;
  std::int64_t value = 0;
};

using FieldValue = std::variant<std::int64_t, std::uint64_t, double, std::string>;

struct EventCopy {
  std::uint64_t timestamp_ns = 0;
  std::vector<std::pair<std::string, FieldValue>> fields;
  std::vector<FrameCopy> frames;
};

struct MetricCopy {
  std::uint32_t type = 0;
  std::string unit;
  double value = 0;
};

struct HealthCopy {
  std::uint32_t severity = 0;
  std::string component;
  std::uint64_t value = 0;
  std::string message;
  std::uint64_t whole = 0;  // what value is a part of (ABI 1.11); 0: no share
  std::string whole_unit;
  std::uint32_t effect = 0;  // loupe_health_effect
};

HealthCopy copy_health(const loupe_health& h);

std::string copy_str(const char* s);
Labels copy_labels(const loupe_record& rec);
std::vector<FrameCopy> copy_frames(const loupe_frame* frames, std::uint32_t n);
HistogramCopy copy_histogram(const loupe_histogram& h);
EventCopy copy_event(const loupe_event& e);

// "name{k=v,k=v}" — the identity of a series in the report.
std::string series_name(const std::string& name, const Labels& labels);
std::string labels_text(const Labels& labels);
// The same for a stack's row: a task's pid and comm as "comm pid" (see the .cpp).
std::string stack_labels_text(const Labels& labels);

// A frame as one token: symbol, else module+0xoffset, else the raw address.
std::string frame_text(const FrameCopy& f);
// Frames folded leaf → root with ';', at most `max_frames` of them.
std::string folded_frames(const std::vector<FrameCopy>& frames, std::size_t max_frames);
// The same in at most `columns` columns (a little more when even the leaf and its caller,
// elided, do not fit): the frames that did not are counted ("… +7 more").
// A stack of kernel frames above user ones that does not fit keeps the kernel leaf and
// counts the rest of the kernel part ("__schedule;… +5 kernel;read;reader;… +2 more").
std::string folded_frames_fit(const std::vector<FrameCopy>& frames, std::size_t columns);
// offwaketime's layout (records.h): the waker's frames root first, a "--" frame, then the
// wakee's leaf first. Leaves the wakee's in `frames` and returns the waker's leaf first;
// nothing when the stack has no waker.
std::optional<std::vector<FrameCopy>> split_waker(std::vector<FrameCopy>& frames);

}  // namespace loupe::sinks

#endif
