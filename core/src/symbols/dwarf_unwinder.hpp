// SPDX-License-Identifier: Apache-2.0
//
// User-stack unwinding from a copy of the stack, perf --call-graph dwarf style: the
// registers and the bytes above sp captured at the sample are replayed through elfutils'
// libdwfl frame API over the CFI (.eh_frame, .debug_frame) of the files the process maps.
// One Dwfl per process, fed from the symbolizer's view of its mappings (ProcessSpace,
// files opened through /proc/PID/root or map_files) and dropped with it (exec, eviction,
// invalidate). Not thread-safe: the symbolizer's lock guards it. Without libdw in the
// build every unwind answers LOUPE_UNWIND_UNSUPPORTED.
#ifndef LOUPE_SYMBOLS_DWARF_UNWINDER_HPP
#define LOUPE_SYMBOLS_DWARF_UNWINDER_HPP

#include <cstdint>
#include <memory>

#include "loupe/abi/host.h"

namespace loupe {

class ProcessSpace;
class ElfFileCache;

struct UnwindResult {
  std::uint32_t n = 0;  // addresses written, leaf (the pc) first
  loupe_unwind_status status = LOUPE_UNWIND_OK;
};

class DwarfUnwinder {
 public:
  explicit DwarfUnwinder(std::uint32_t pid);
  ~DwarfUnwinder();
  DwarfUnwinder(const DwarfUnwinder&) = delete;
  DwarfUnwinder& operator=(const DwarfUnwinder&) = delete;

  // Reports the files behind executable mappings of `space` that were not reported yet
  // (the first call reports them all; later ones add what a dlopen mapped). Remembers the
  // space's reload generation so a caller can tell whether another sync is due.
  void sync_modules(ProcessSpace& space, ElfFileCache& files);
  std::uint64_t synced_generation() const { return synced_generation_; }
  // Whether a reported module covers `pc`.
  bool covers(std::uint64_t pc) const;

  UnwindResult unwind(const loupe_user_regs& regs, const void* stack, std::uint32_t stack_len,
                      std::uint64_t* out, std::uint32_t max);

  std::size_t modules() const;

  struct State;  // libdwfl's callbacks and the sample being unwound (dwarf_unwinder.cpp)

 private:
  std::unique_ptr<State> s_;
  std::uint64_t synced_generation_ = 0;
};

}  // namespace loupe

#endif  // LOUPE_SYMBOLS_DWARF_UNWINDER_HPP
