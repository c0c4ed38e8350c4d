// SPDX-License-Identifier: Apache-2.0
#include "record_copy.hpp"

#include "report_text.hpp"

#include <cstdio>

namespace loupe::sinks {

std::string copy_str(const char* s) {
  return s ? std::string(s) : std::string();
}

Labels copy_labels(const loupe_record& rec) {
  Labels out;
  for (std::uint32_t i = 0; rec.labels && i < rec.n_labels; ++i)
    out.emplace_back(copy_str(rec.labels[i].key), copy_str(rec.labels[i].value));
  return out;
}

std::vector<FrameCopy> copy_frames(const loupe_frame* frames, std::uint32_t n) {
  std::vector<FrameCopy> out;
  if (!frames) return out;
  out.reserve(n);
  for (std::uint32_t i = 0; i < n; ++i) {
    FrameCopy f;
    f.address = frames[i].address;
    if (frames[i].symbol) f.symbol = frames[i].symbol;
    if (frames[i].module) f.module = frames[i].module;
    f.offset = frames[i].offset;
    out.push_back(std::move(f));
  }
  return out;
}

HistogramCopy copy_histogram(const loupe_histogram& h) {
  HistogramCopy c;
  c.scheme = h.scheme;
  c.sub_buckets = h.sub_buckets;
  c.unit = copy_str(h.unit);
  if (h.buckets) c.buckets.assign(h.buckets, h.buckets + h.n_buckets);
  c.count = h.count;
  c.sum = h.sum;
  c.min = h.min;
  c.max = h.max;
  if (h.percentiles) c.percentiles.assign(h.percentiles, h.percentiles + h.n_percentiles);
  return c;
}

EventCopy copy_event(const loupe_event& e) {
  EventCopy c;
  c.timestamp_ns = e.timestamp_ns;
  for (std::uint32_t i = 0; e.fields && i < e.n_fields; ++i) {
    const loupe_field& f = e.fields[i];
    FieldValue v;
    switch (f.type) {
      case LOUPE_FIELD_I64: v = f.v.i64; break;
      case LOUPE_FIELD_U64: v = f.v.u64; break;
      case LOUPE_FIELD_F64: v = f.v.f64; break;
      case LOUPE_FIELD_STR: v = copy_str(f.v.str); break;
      default: continue;
    }
    c.fields.emplace_back(copy_str(f.key), std::move(v));
  }
  c.frames = copy_frames(e.frames, e.n_frames);
  return c;
}

std::string labels_text(const Labels& labels) {
  std::string out;
  for (const auto& [k, v] : labels) {
    if (!out.empty()) out += ',';
    out += k + '=' + v;
  }
  return out;
}

std::string series_name(const std::string& name, const Labels& labels) {
  if (labels.empty()) return name;
  return name + '{' + labels_text(labels) + '}';
}

std::string frame_text(const FrameCopy& f) {
  char buf[64];
  if (f.symbol && !f.symbol->empty()) return *f.symbol;
  if (f.module && !f.module->empty()) {
    std::snprintf(buf, sizeof buf, "+0x%llx", static_cast<unsigned long long>(f.offset));
    std::string mod = *f.module;
    auto slash = mod.rfind('/');
    if (slash != std::string::npos) mod = mod.substr(slash + 1);
    return mod + buf;
  }
  std::snprintf(buf, sizeof buf, "0x%llx", static_cast<unsigned long long>(f.address));
  return buf;
}

std::string folded_frames(const std::vector<FrameCopy>& frames, std::size_t max_frames) {
  std::string out;
  std::size_t n = frames.size() < max_frames ? frames.size() : max_frames;
  for (std::size_t i = 0; i < n; ++i) {
    if (i) out += ';';
    out += frame_text(frames[i]);
  }
  if (frames.size() > n) out += ";… +" + std::to_string(frames.size() - n) + " more";
  if (frames.empty()) out = "(no frames)";
  return out;
}

std::string folded_frames_fit(const std::vector<FrameCopy>& frames, std::size_t columns) {
  if (frames.empty()) return "(no frames)";
  auto suffix = [](std::size_t left) {
    return left ? ";… +" + std::to_string(left) + " more" : std::string();
  };
  // The leaf and its direct caller are always there, whole when they fit, else the longer
  // elided in its middle (a C++ symbol keeps its start and its end); further frames follow
  // while they fit, and the rest are counted.
  std::vector<std::string> f;
  for (std::size_t i = 0; i < frames.size() && i < 2; ++i) f.push_back(frame_text(frames[i]));
  const std::size_t need = display_width(suffix(frames.size() - f.size())) + f.size() - 1;
  const std::size_t avail = columns > need + 16 ? columns - need : 16;
  if (f.size() == 1) {
    f[0] = elide_middle(f[0], avail);
  } else if (display_width(f[0]) + display_width(f[1]) > avail) {
    const std::size_t w0 = display_width(f[0]), w1 = display_width(f[1]), half = avail / 2;
    if (w0 <= half)
      f[1] = elide_middle(f[1], avail - w0);
    else if (w1 <= half)
      f[0] = elide_middle(f[0], avail - w1);
    else
      f[0] = elide_middle(f[0], half), f[1] = elide_middle(f[1], avail - half);
  }
  std::string out = f[0] + (f.size() > 1 ? ";" + f[1] : "");
  std::size_t i = f.size();
  for (; i < frames.size(); ++i) {
    std::string next = out + ";" + frame_text(frames[i]);
    if (display_width(next + suffix(frames.size() - i - 1)) > columns) break;
    out = std::move(next);
  }
  return out + suffix(frames.size() - i);
}

}  // namespace loupe::sinks
