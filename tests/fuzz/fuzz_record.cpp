// SPDX-License-Identifier: Apache-2.0
//
// Fuzzes the record boundary: a record of any kind built from bytes (NULL or present
// payloads, names, labels, keys; any counts of buckets, frames, values and fields, with
// any bounds and counts, overlapping or inverted buckets), checked by check_record() as
// the host does for every record a plugin emits; an accepted record is deep-copied into
// an OwnedRecord (which also computes percentiles) and the copy is read in full.
#include <fuzzer/FuzzedDataProvider.h>

#include <cstdint>
#include <cstring>
#include <deque>
#include <string>
#include <vector>

#include "dispatch/owned_record.hpp"

namespace {

class Builder {
 public:
  explicit Builder(FuzzedDataProvider& in) : in_(in) {}

  const char* str() {
    if (in_.ConsumeIntegralInRange(0, 7) == 0) return nullptr;
    return strings_.emplace_back(in_.ConsumeRandomLengthString(16)).c_str();
  }
  template <typename T>
  T* array(std::uint32_t n) {
    return reinterpret_cast<T*>(keep_block(n * sizeof(T)));
  }
  std::uint32_t count(std::uint32_t max) {
    return in_.ConsumeIntegralInRange<std::uint32_t>(0, max);
  }
  FuzzedDataProvider& in() { return in_; }

 private:
  void* keep_block(std::size_t bytes) {
    auto& v = arrays_.emplace_back(std::vector<unsigned char>(bytes ? bytes : 1));
    return v.data();
  }
  FuzzedDataProvider& in_;
  std::deque<std::string> strings_;
  std::deque<std::vector<unsigned char>> arrays_;
};

template <typename T>
T* maybe_null(Builder& b, std::uint32_t n) {
  if (b.in().ConsumeIntegralInRange(0, 9) == 0) return nullptr;
  return b.array<T>(n);
}

void fill_frames(Builder& b, loupe_frame* f, std::uint32_t n) {
  for (std::uint32_t i = 0; f && i < n; ++i)
    f[i] = {b.in().ConsumeIntegral<std::uint64_t>(),
            b.str(),
            b.str(),
            b.in().ConsumeIntegral<std::uint64_t>(),
            b.in().ConsumeIntegralInRange<std::uint32_t>(0, 4),
            b.in().ConsumeIntegralInRange<std::uint32_t>(0, 20)};
}

// Typed fields (an event's, a finding's evidence), maybe NULL, with keys maybe NULL.
const loupe_field* fuzz_fields(Builder& b, std::uint32_t n) {
  auto* fl = maybe_null<loupe_field>(b, n);
  for (std::uint32_t i = 0; fl && i < n; ++i) {
    fl[i] = {};
    fl[i].key = b.str();
    fl[i].type = b.in().ConsumeIntegralInRange<std::uint32_t>(0, 5);
    if (fl[i].type == LOUPE_FIELD_STR)
      fl[i].v.str = b.str();
    else
      fl[i].v.u64 = b.in().ConsumeIntegral<std::uint64_t>();
  }
  return fl;
}

// Touches every byte the copy points to, so a dangling or short copy is an ASan report.
std::size_t read_all(const loupe_record& r) {
  std::size_t sum = 0;
  auto s = [&](const char* p) { sum += p ? std::strlen(p) : 0; };
  s(r.plugin);
  s(r.name);
  for (std::uint32_t i = 0; i < r.n_labels; ++i) s(r.labels[i].key), s(r.labels[i].value);
  auto frames = [&](const loupe_frame* f, std::uint32_t n) {
    for (std::uint32_t i = 0; i < n; ++i) s(f[i].symbol), s(f[i].module), sum += f[i].address;
  };
  switch (r.kind) {
    case LOUPE_RECORD_HISTOGRAM:
      s(r.histogram->unit);
      for (std::uint32_t i = 0; i < r.histogram->n_buckets; ++i)
        sum += r.histogram->buckets[i].count;
      for (std::uint32_t i = 0; i < r.histogram->n_percentiles; ++i) {
        const loupe_percentile& p = r.histogram->percentiles[i];
        // The estimate must lie inside the error bound it reports.
        if (p.value < p.lower || (p.value >= p.upper && p.upper != UINT64_MAX)) __builtin_trap();
        sum += p.value;
      }
      break;
    case LOUPE_RECORD_STACK_SAMPLE:
      frames(r.stack->frames, r.stack->n_frames);
      for (std::uint32_t i = 0; i < r.stack->n_values; ++i)
        s(r.stack->values[i].name), s(r.stack->values[i].unit);
      break;
    case LOUPE_RECORD_EVENT:
      frames(r.event->frames, r.event->n_frames);
      for (std::uint32_t i = 0; i < r.event->n_fields; ++i) {
        s(r.event->fields[i].key);
        if (r.event->fields[i].type == LOUPE_FIELD_STR) s(r.event->fields[i].v.str);
      }
      break;
    case LOUPE_RECORD_METRIC: s(r.metric->unit); break;
    case LOUPE_RECORD_HEALTH: s(r.health->component), s(r.health->message); break;
    case LOUPE_RECORD_FINDING:
      s(r.finding->rule), s(r.finding->statement);
      for (std::uint32_t i = 0; i < r.finding->n_evidence; ++i) {
        s(r.finding->evidence[i].key);
        if (r.finding->evidence[i].type == LOUPE_FIELD_STR) s(r.finding->evidence[i].v.str);
      }
      break;
  }
  return sum;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  FuzzedDataProvider in(data, size);
  Builder b(in);
  loupe_record rec{};
  rec.size = in.ConsumeBool() ? sizeof(rec) : in.ConsumeIntegral<std::uint32_t>();
  rec.kind = in.ConsumeIntegralInRange<std::uint32_t>(0, 6);
  rec.name = b.str();
  rec.is_final = in.ConsumeBool();
  rec.window_start_ns = in.ConsumeIntegral<std::uint64_t>();
  rec.window_end_ns = in.ConsumeIntegral<std::uint64_t>();
  rec.n_labels = b.count(4);
  auto* labels = maybe_null<loupe_label>(b, rec.n_labels);
  for (std::uint32_t i = 0; labels && i < rec.n_labels; ++i) labels[i] = {b.str(), b.str()};
  rec.labels = labels;

  loupe_histogram h{sizeof(h)};
  loupe_stack_sample st{sizeof(st)};
  loupe_event ev{sizeof(ev)};
  loupe_metric m{sizeof(m)};
  loupe_health he{sizeof(he)};
  loupe_finding fi{sizeof(fi)};
  switch (rec.kind) {
    case LOUPE_RECORD_HISTOGRAM: {
      h.scheme = in.ConsumeIntegralInRange<std::uint32_t>(0, 4);
      h.unit = b.str();
      h.n_buckets = b.count(12);
      auto* bk = maybe_null<loupe_bucket>(b, h.n_buckets);
      for (std::uint32_t i = 0; bk && i < h.n_buckets; ++i) {
        // Small numbers most of the time, so sums and ranks stay meaningful; extremes too.
        bool small = in.ConsumeBool();
        auto v = [&] {
          return small ? in.ConsumeIntegralInRange<std::uint64_t>(0, 1000)
                       : in.ConsumeIntegral<std::uint64_t>();
        };
        bk[i] = {v(), v(), v()};
      }
      h.buckets = bk;
      h.count = in.ConsumeIntegral<std::uint64_t>();
      h.sum = in.ConsumeIntegral<std::uint64_t>();
      h.min = in.ConsumeBool() ? in.ConsumeIntegralInRange<std::uint64_t>(0, 1000)
                               : in.ConsumeIntegral<std::uint64_t>();
      h.max = in.ConsumeBool() ? in.ConsumeIntegralInRange<std::uint64_t>(0, 1000)
                               : in.ConsumeIntegral<std::uint64_t>();
      if (in.ConsumeBool()) rec.histogram = &h;
      break;
    }
    case LOUPE_RECORD_STACK_SAMPLE: {
      st.n_frames = b.count(8);
      auto* f = maybe_null<loupe_frame>(b, st.n_frames);
      fill_frames(b, f, st.n_frames);
      st.frames = f;
      st.n_values = b.count(4);
      auto* v = maybe_null<loupe_value>(b, st.n_values);
      for (std::uint32_t i = 0; v && i < st.n_values; ++i)
        v[i] = {b.str(), b.str(), in.ConsumeIntegral<std::int64_t>()};
      st.values = v;
      if (in.ConsumeBool()) rec.stack = &st;
      break;
    }
    case LOUPE_RECORD_EVENT: {
      ev.timestamp_ns = in.ConsumeIntegral<std::uint64_t>();
      ev.n_fields = b.count(6);
      ev.fields = fuzz_fields(b, ev.n_fields);
      ev.n_frames = b.count(6);
      auto* f = maybe_null<loupe_frame>(b, ev.n_frames);
      fill_frames(b, f, ev.n_frames);
      ev.frames = f;
      if (in.ConsumeBool()) rec.event = &ev;
      break;
    }
    case LOUPE_RECORD_METRIC:
      m.type = in.ConsumeIntegralInRange<std::uint32_t>(0, 3);
      m.unit = b.str();
      m.value = in.ConsumeFloatingPoint<double>();
      if (in.ConsumeBool()) rec.metric = &m;
      break;
    case LOUPE_RECORD_FINDING:
      fi.rule = b.str();
      fi.statement = b.str();
      fi.weight = in.ConsumeFloatingPoint<double>();
      fi.n_evidence = b.count(6);
      fi.evidence = fuzz_fields(b, fi.n_evidence);
      if (in.ConsumeBool()) rec.finding = &fi;
      break;
    case LOUPE_RECORD_HEALTH:
      he.severity = in.ConsumeIntegralInRange<std::uint32_t>(0, 3);
      he.component = b.str();
      he.message = b.str();
      he.value = in.ConsumeIntegral<std::uint64_t>();
      if (in.ConsumeBool()) rec.health = &he;
      break;
  }
  if (!loupe::check_record(rec).empty()) return 0;
  loupe::OwnedRecord copy(rec, "fuzz", 1, 2);
  const loupe_record& v = copy.view();
  if (v.kind != rec.kind || v.n_labels != rec.n_labels) __builtin_trap();
  read_all(v);
  return 0;
}
