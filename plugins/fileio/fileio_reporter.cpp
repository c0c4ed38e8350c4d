// SPDX-License-Identifier: Apache-2.0
#include "fileio_reporter.hpp"

#include <algorithm>
#include <cstring>
#include <map>
#include <utility>
#include <vector>

#include "loupe/sdk/percpu.hpp"
#include "loupe/sdk/records.hpp"

namespace loupe::fileio {

const char* op_name(std::uint32_t op) {
  switch (op) {
    case FIO_OP_OPEN: return "open";
    case FIO_OP_READ: return "read";
    case FIO_OP_WRITE: return "write";
    case FIO_OP_FSYNC: return "fsync";
    case FIO_OP_STAT: return "stat";
    case FIO_OP_CLOSE: return "close";
  }
  return "other";
}

std::string file_label(std::uint32_t dev, std::uint64_t ino) {
  return std::to_string(dev >> 20) + ":" + std::to_string(dev & 0xfffff) + ":" +
         std::to_string(ino);
}

std::string errno_name(int err) {
  const char* n = strerrorname_np(err);
  return n ? n : std::to_string(err);
}

std::string path_text(const fio_path& p) {
  if (p.given) {
    const std::string name(p.comps[0], strnlen(p.comps[0], FIO_NAME_LEN));
    return p.truncated ? name + "…" : name;
  }
  std::string out;
  const std::uint32_t depth = std::min<std::uint32_t>(p.depth, FIO_PATH_DEPTH);
  for (std::uint32_t i = depth; i-- > 0;) {
    const char* c = p.comps[i];
    const std::string name(c, strnlen(c, FIO_NAME_LEN));
    if (name == "/") continue;  // a filesystem's root dentry
    out += "/" + name;
  }
  if (p.truncated) out = "…" + out;
  return out.empty() ? "/" : out;
}

void FileioReporter::collect(bool is_final, std::uint64_t ws, std::uint64_t we) {
  using File = std::pair<std::uint32_t, std::uint64_t>;  // dev, ino
  std::map<File, std::string> names;
  sdk::for_each_entry<fio_file, fio_path>(maps_.paths_fd,
                                          [&](const fio_file& f, const fio_path& p) {
                                            names[{f.dev, f.ino}] = path_text(p);
                                          });
  struct Totals {
    std::uint64_t bytes = 0, ns = 0;
  };
  std::map<File, Totals> totals;
  auto name_of = [&](const File& f) {
    auto it = names.find(f);
    return it != names.end() ? it->second : std::string("(unnamed)");
  };
  auto file_of = [](const File& f) { return file_label(f.first, f.second); };
  sdk::for_each_entry<fio_key, fio_stats>(
      maps_.stats_fd, [&](const fio_key& k, const fio_stats& s) {
        const File f{k.dev, k.ino};
        const std::string path = name_of(f);
        auto labels = [&](sdk::RecordBuilder& rb) -> sdk::RecordBuilder& {
          rb.label("path", path).label("file", file_of(f)).label("op", op_name(k.op));
          return rb.final(is_final).window(ws, we);
        };
        std::vector<std::uint64_t> slots(s.slots, s.slots + FIO_HIST_SLOTS);
        sdk::RecordBuilder h(LOUPE_RECORD_HISTOGRAM, "file_latency");
        labels(h).log2_histogram("ns", slots, s.count, s.total_ns, 0, s.max_ns).emit(host_);
        for (const auto& [name, unit, v] :
             {std::tuple<const char*, const char*, std::uint64_t>{"file_ops", "count", s.count},
              {"file_bytes", "bytes", s.bytes},
              {"file_errors", "count", s.errors}}) {
          sdk::RecordBuilder rb(LOUPE_RECORD_METRIC, name);
          labels(rb).metric(LOUPE_METRIC_COUNTER, unit, static_cast<double>(v)).emit(host_);
        }
        totals[f].bytes += s.bytes;
        totals[f].ns += s.total_ns;
      });
  // filetop's view: the top files by bytes moved and by time spent, ranked.
  std::vector<std::pair<File, Totals>> rows(totals.begin(), totals.end());
  for (const auto& [name, unit, member] :
       {std::tuple<const char*, const char*, std::uint64_t Totals::*>{"file_total_bytes", "bytes",
                                                                      &Totals::bytes},
        {"file_total_ns", "ns", &Totals::ns}}) {
    std::sort(rows.begin(), rows.end(),
              [m = member](const auto& a, const auto& b) { return a.second.*m > b.second.*m; });
    for (std::size_t i = 0; i < rows.size() && i < top_; ++i) {
      sdk::RecordBuilder rb(LOUPE_RECORD_METRIC, name);
      rb.label("path", name_of(rows[i].first)).label("file", file_of(rows[i].first));
      rb.label("rank", std::to_string(i + 1)).final(is_final).window(ws, we);
      rb.metric(LOUPE_METRIC_COUNTER, unit, static_cast<double>(rows[i].second.*member));
      rb.emit(host_);
    }
  }
  // Failed calls by errno: on their file, or (no file) on the operation alone.
  sdk::for_each_entry<fio_err_key, std::uint64_t>(maps_.errnos_fd, [&](const fio_err_key& k,
                                                                       const std::uint64_t& n) {
    const bool no_file = k.ino == 0 && k.dev == 0;
    sdk::RecordBuilder rb(LOUPE_RECORD_METRIC, no_file ? "file_failed" : "file_errno");
    if (!no_file) {
      const File f{k.dev, k.ino};
      rb.label("path", name_of(f)).label("file", file_of(f));
    }
    rb.label("op", op_name(k.op)).label("errno", errno_name(k.err));
    rb.final(is_final).window(ws, we).metric(LOUPE_METRIC_COUNTER, "count", static_cast<double>(n));
    rb.emit(host_);
  });
  std::uint32_t zero = 0;
  const auto c = sdk::read_per_cpu_sum<fio_counters>(maps_.counters_fd, &zero);
  sdk::RecordBuilder calls(LOUPE_RECORD_METRIC, "file_calls");
  calls.final(is_final)
      .window(ws, we)
      .metric(LOUPE_METRIC_COUNTER, "count", static_cast<double>(c.calls))
      .emit(host_);
  sdk::RecordBuilder timed(LOUPE_RECORD_METRIC, "file_calls_timed");
  timed.final(is_final)
      .window(ws, we)
      .metric(LOUPE_METRIC_COUNTER, "count", static_cast<double>(c.timed))
      .emit(host_);
  sdk::RecordBuilder nr(LOUPE_RECORD_METRIC, "file_calls_not_regular");
  nr.final(is_final)
      .window(ws, we)
      .metric(LOUPE_METRIC_COUNTER, "count", static_cast<double>(c.not_regular))
      .emit(host_);
  sdk::RecordBuilder oe(LOUPE_RECORD_METRIC, "file_open_errors");
  oe.final(is_final)
      .window(ws, we)
      .metric(LOUPE_METRIC_COUNTER, "count", static_cast<double>(c.open_errors))
      .emit(host_);
  const sdk::HealthRow rows_h[] = {
      {"fileio/inflight_full", c.inflight_full,
       "calls not timed: too many threads in a file syscall at once (raise max_threads)"},
      {"fileio/stats_full", c.stats_full,
       "calls not counted: too many (file, operation) rows (raise max_files)"},
      {"fileio/paths_full", c.paths_full,
       "files without a name: the path table is full (raise max_files)"},
      {"fileio/errors_full", c.errors_full,
       "failed calls not broken down by errno: the errno table is full (raise max_files)"},
  };
  sdk::emit_health_rows(host_, "fileio", rows_h, is_final, ws, we);
}

}  // namespace loupe::fileio
