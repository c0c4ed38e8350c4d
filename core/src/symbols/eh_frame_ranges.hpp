// SPDX-License-Identifier: Apache-2.0
//
// The code ranges of the FDEs in an .eh_frame section: the function boundaries a stripped
// file still carries (every function the compiler emits unwind info for has one), used to
// group addresses per function where no symbol names them.
#ifndef LOUPE_SYMBOLS_EH_FRAME_RANGES_HPP
#define LOUPE_SYMBOLS_EH_FRAME_RANGES_HPP

#include <cstddef>
#include <cstdint>
#include <vector>

namespace loupe {

struct FdeRange {
  std::uint64_t start;  // link-time address of the first byte the FDE covers
  std::uint64_t end;    // one past the last
};

// Parses the CIEs and FDEs of an .eh_frame section loaded at link-time address
// `section_vaddr` (its sh_addr: pc-relative encodings are relative to it). Returns the
// ranges sorted by start, empty ones and entries that cannot be decoded skipped. Never
// reads outside [data, data + size).
std::vector<FdeRange> parse_eh_frame_ranges(const std::uint8_t* data, std::size_t size,
                                            std::uint64_t section_vaddr);

}  // namespace loupe

#endif  // LOUPE_SYMBOLS_EH_FRAME_RANGES_HPP
