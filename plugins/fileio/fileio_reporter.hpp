// SPDX-License-Identifier: Apache-2.0
//
// fileio's records from its kernel maps, per file (device:inode, named by its path) and
// operation: HISTOGRAM file_latency (log2 ns), METRICs file_ops, file_bytes, file_errors;
// per file, for the top files by bytes and by time: file_total_bytes, file_total_ns with
// their rank. Reports are cumulative since the start; collect() runs on the session thread.
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
};

const char* op_name(std::uint32_t op);
// "/a/b/c" from the components (file first); "…/b/c" when the walk was cut.
std::string path_text(const fio_path& p);

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
