// SPDX-License-Identifier: Apache-2.0
//
// fileio's records from its kernel maps, per file (device:inode, named by its path) and
// operation: HISTOGRAM file_latency (log2 ns), METRICs file_ops, file_bytes, file_errors;
// per file, for the top files by bytes and by time: file_total_bytes, file_total_ns with
// their rank; METRIC file_errno (failed calls per file, operation and errno) and
// file_failed (failed opens and stats-by-path, which name no file, per errno). Reports are
// cumulative since the start; collect() runs on the session thread.
#ifndef LOUPE_FILEIO_REPORTER_HPP
#define LOUPE_FILEIO_REPORTER_HPP

#include <cstdint>
#include <string>

#include "fileio.h"
#include "loupe/sdk/host.hpp"

namespace loupe::fileio {

struct ReporterMaps {
  int stats_fd = -1;
  int paths_fd = -1;
  int counters_fd = -1;
  int errnos_fd = -1;
};

const char* op_name(std::uint32_t op);
// "/a/b/c" from the components (file first); "…/b/c" when the walk was cut; a name given
// to stat (never opened in the session) as it was given.
std::string path_text(const fio_path& p);
// "major:minor:inode", dev as the kernel's dev_t (major << 20 | minor).
std::string file_label(std::uint32_t dev, std::uint64_t ino);
// "ENOENT" (the number when the C library has no name for it).
std::string errno_name(int err);

class FileioReporter {
 public:
  FileioReporter(const sdk::Host& host, ReporterMaps maps, std::size_t top)
      : host_(host), maps_(maps), top_(top) {}

  void collect(bool is_final, std::uint64_t window_start_ns, std::uint64_t window_end_ns);

 private:
  sdk::Host host_;
  ReporterMaps maps_;
  std::size_t top_;
};

}  // namespace loupe::fileio

#endif  // LOUPE_FILEIO_REPORTER_HPP
