// SPDX-License-Identifier: Apache-2.0
//
// The native unwind table of one ELF file: its .eh_frame turned into compact x86-64 rows
// (bpf/include/loupe/unwind.h) that the in-kernel unwinder (unwind.bpf.h) binary-searches
// by pc, as the OpenTelemetry profiler's stack deltas and Parca's unwind tables do. Every
// row of the CFI becomes one row here (identical neighbours merged); a rule the kernel side
// does not follow is kept as a marked row, so the walk stops there instead of guessing.
#ifndef LOUPE_UNWIND_FILE_ROWS_HPP
#define LOUPE_UNWIND_FILE_ROWS_HPP

#include <cstdint>
#include <string>
#include <vector>

#include "loupe/unwind.h"
#include "util/result.hpp"

namespace loupe {

struct FileRowsStats {
  std::uint64_t fdes = 0;         // FDEs read
  std::uint64_t cfi_rows = 0;     // rows the CFI has (before merging)
  std::uint64_t plt = 0;          // rows of PLT stubs (the linker's CFA expression)
  std::uint64_t signal = 0;       // rows of signal trampolines
  std::uint64_t unsupported = 0;  // rows with a rule the kernel does not follow
  std::uint64_t failed = 0;       // pcs libdw could not answer for (ended their FDE)
};

// A loadable segment of the file (PT_LOAD), for the load bias of a mapping.
struct LoadSegment {
  std::uint64_t offset;  // p_offset
  std::uint64_t vaddr;   // p_vaddr
  std::uint64_t filesz;
  bool executable;
};

struct FileRows {
  std::vector<loupe_unwind_row> rows;  // sorted by pc, no two neighbours alike
  std::vector<LoadSegment> segments;
  FileRowsStats stats;

  // runtime - link-time address of a mapping of this file at `map_start` with file offset
  // `file_offset` (/proc/PID/maps); false when no loadable segment holds that offset.
  bool bias_for(std::uint64_t map_start, std::uint64_t file_offset, std::uint64_t* bias) const;

  std::size_t bytes() const { return rows.size() * sizeof(loupe_unwind_row); }
  // The row in force at link-time address `pc`; nullptr before the first row or past
  // 4 GiB. A CFA_NONE row means no FDE covers the pc.
  const loupe_unwind_row* find(std::uint64_t pc) const;
};

// The page index the in-kernel unwinder searches a file's rows through (loupe/unwind.h,
// LOUPE_UNWIND_PAGE_SHIFT): page_count + 1 entries, `pc` holding a row number; `*base`
// gets page 0's address. Empty for no rows.
std::vector<loupe_unwind_row> unwind_page_index(const std::vector<loupe_unwind_row>& rows,
                                                std::uint32_t* base);

// Builds the table of the ELF file at `path` from its .eh_frame. An error when the file
// cannot be read, has no .eh_frame, is not x86-64, or loupe was built without libdw.
Status build_file_rows(const std::string& path, FileRows* out);

}  // namespace loupe

#endif  // LOUPE_UNWIND_FILE_ROWS_HPP
