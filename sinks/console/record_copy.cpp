// SPDX-License-Identifier: Apache-2.0
#include "record_copy.hpp"

#include <algorithm>
#include <cstdio>
#include <iterator>

#include "loupe/report/frame_name.hpp"
#include "loupe/report/program_view.hpp"
#include "report_text.hpp"

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
    f.kind = frames[i].kind;
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

std::string stack_labels_text(const Labels& labels) {
  // "pid=4242,comm=gzip" is said as perf says a task, "gzip 4242"; "waker_pid" and
  // "waker_comm" as "waker=gzip 4242". Other labels stay key=value.
  auto value_of = [&labels](const std::string& key) -> const std::string* {
    for (const auto& [k, v] : labels)
      if (k == key) return &v;
    return nullptr;
  };
  std::string out;
  for (const auto& [k, v] : labels) {
    std::string item = k + '=' + v;
    const bool is_pid = k.size() >= 3 && k.compare(k.size() - 3, 3, "pid") == 0;
    const bool is_comm = k.size() >= 4 && k.compare(k.size() - 4, 4, "comm") == 0;
    if (is_pid && value_of(k.substr(0, k.size() - 3) + "comm")) continue;  // said with its comm
    if (is_comm) {
      const std::string prefix = k.substr(0, k.size() - 4);
      if (const std::string* pid = value_of(prefix + "pid")) {
        item = v + ' ' + *pid;
        if (prefix.size() > 1 && prefix.back() == '_')
          item = prefix.substr(0, prefix.size() - 1) + '=' + item;
        else if (!prefix.empty())
          item = prefix + '=' + item;
      }
    }
    if (!out.empty()) out += ',';
    out += item;
  }
  return out;
}

std::string series_name(const std::string& name, const Labels& labels) {
  if (labels.empty()) return name;
  return name + '{' + labels_text(labels) + '}';
}

// As every other output names it (report::frame_name), but an address alone.
std::string frame_text(const FrameCopy& f) {
  if (!f.symbol && !f.module && !LOUPE_FRAME_IS_SOURCE(f.kind)) {
    char buf[32];
    std::snprintf(buf, sizeof buf, "0x%llx", static_cast<unsigned long long>(f.address));
    return buf;
  }
  loupe_frame lf{};
  lf.address = f.address;
  lf.symbol = f.symbol ? f.symbol->c_str() : nullptr;
  lf.module = f.module ? f.module->c_str() : nullptr;
  lf.offset = f.offset;
  lf.kind = f.kind;
  return report::frame_name(lf);
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

namespace {

std::string more_suffix(std::size_t left, const char* what = "more") {
  return left ? ";… +" + std::to_string(left) + " " + what : std::string();
}

// frames[from, to) folded leaf → root in `columns`: the first two whole when they fit,
// else the longer elided in its middle (a C++ symbol keeps its start and its end); further
// frames follow while they fit, and the rest are counted.
std::string fit_run(const std::vector<FrameCopy>& frames, std::size_t from, std::size_t to,
                    std::size_t columns, std::size_t* shown = nullptr) {
  std::vector<std::string> f;
  for (std::size_t i = from; i < to && f.size() < 2; ++i) f.push_back(frame_text(frames[i]));
  const std::size_t n = to - from;
  const std::size_t need = display_width(more_suffix(n - f.size())) + f.size() - 1;
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
  std::size_t i = from + f.size();
  for (; i < to; ++i) {
    std::string next = out + ";" + frame_text(frames[i]);
    if (display_width(next + more_suffix(to - i - 1)) > columns) break;
    out = std::move(next);
  }
  if (shown) *shown = i - from;
  return out + more_suffix(to - i);
}

// A stack that holds frames of a language runtime (Python, Java) reads as the program's own
// call path: the native leaf (a regex match, a syscall) kept short, what lies between it
// and the innermost language frame counted, then the language frames alone, innermost
// first. The interpreter's own frames between them (_PyEval_EvalFrameDefault, call stubs)
// are what every stack of that runtime holds: folded, as kernel frames give way below.
std::string fit_language(const std::vector<FrameCopy>& frames, std::size_t from, std::size_t to,
                         std::size_t columns) {
  // The one rule every report takes the program's frames by (report/program_view.hpp):
  // named language frames, the JVM's stubs left out.
  const auto lang = report::program_view(
      frames.data() + from, to - from, [](const FrameCopy& f) { return f.kind; },
      [](const FrameCopy& f) { return std::string_view(f.symbol ? *f.symbol : ""); });
  if (lang.empty() || !LOUPE_FRAME_IS_SOURCE(lang.front()->kind)) return {};
  const auto first = static_cast<std::size_t>(lang.front() - frames.data());
  std::string lead;
  if (first > from) {
    lead = elide_middle(frame_text(frames[from]), std::max<std::size_t>(columns / 6, 12));
    if (first - from > 1) lead += more_suffix(first - from - 1, "native");
    lead += ";";
  }
  // The program's functions whole, as many as fit: a name cut in its middle reads as
  // nothing (only the innermost is elided, when even it alone does not fit).
  const std::size_t room = columns > display_width(lead) + 24 ? columns - display_width(lead) : 24;
  std::string out;
  std::size_t i = 0;
  for (; i < lang.size(); ++i) {
    const std::string next = (i ? out + ";" : out) + frame_text(*lang[i]);
    if (display_width(next + more_suffix(lang.size() - i - 1)) > room) break;
    out = next;
  }
  if (i == 0) {
    out = elide_middle(frame_text(*lang[0]), room - display_width(more_suffix(lang.size() - 1)));
    i = 1;
  }
  return lead + out + more_suffix(lang.size() - i);
}

std::string fit_stack(const std::vector<FrameCopy>& frames, std::size_t from, std::size_t to,
                      std::size_t columns) {
  if (from >= to) return "(no frames)";
  if (std::string lang = fit_language(frames, from, to, columns); !lang.empty()) return lang;
  std::size_t shown = 0;
  std::string all = fit_run(frames, from, to, columns, &shown);
  // Kernel frames above the user ones (a blocked read, a page fault) fill the room with
  // the scheduler's or the fault handler's frames; when they do not all fit, the kernel
  // leaf stays, the rest of the kernel part is counted, and the user frames follow: what
  // the program was doing is the row's point.
  std::size_t user = from;
  while (user < to && frames[user].kind == LOUPE_FRAME_KERNEL) ++user;
  if (user - from < 2 || user == to || from + shown > user) return all;
  const std::string leaf =
      elide_middle(frame_text(frames[from]), std::max<std::size_t>(columns / 4, 12));
  const std::string skipped = more_suffix(user - from - 1, "kernel").substr(1);
  std::size_t used = display_width(leaf) + display_width(skipped) + 2;
  if (columns >= used + 32)
    return leaf + ";" + skipped + ";" + fit_run(frames, user, to, columns - used);
  // Too narrow for the kernel leaf too: the user frames come first.
  const std::string all_kernel = more_suffix(user - from, "kernel").substr(1);
  used = display_width(all_kernel) + 1;
  return all_kernel + ";" + fit_run(frames, user, to, columns > used + 16 ? columns - used : 16);
}

}  // namespace

std::string folded_frames_fit(const std::vector<FrameCopy>& frames, std::size_t columns) {
  return fit_stack(frames, 0, frames.size(), columns);
}

std::optional<std::vector<FrameCopy>> split_waker(std::vector<FrameCopy>& frames) {
  auto sep = std::find_if(frames.begin(), frames.end(),
                          [](const FrameCopy& f) { return f.symbol && *f.symbol == "--"; });
  if (sep == frames.end()) return std::nullopt;
  std::vector<FrameCopy> waker(std::make_reverse_iterator(sep), frames.rend());
  frames.erase(frames.begin(), sep + 1);
  return waker;
}

HealthCopy copy_health(const loupe_health& h) {
  HealthCopy c{h.severity, copy_str(h.component), h.value, copy_str(h.message)};
  if (LOUPE_ABI_HAS_FIELD(&h, loupe_health, effect)) {
    c.whole = h.whole;
    c.whole_unit = copy_str(h.whole_unit);
    c.effect = h.effect;
  }
  return c;
}

}  // namespace loupe::sinks
