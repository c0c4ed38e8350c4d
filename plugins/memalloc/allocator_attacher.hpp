// SPDX-License-Identifier: Apache-2.0
//
// Attaches the entry uprobes and the shared return uprobe to each allocator function.
#ifndef LOUPE_MEMALLOC_ALLOCATOR_ATTACHER_HPP
#define LOUPE_MEMALLOC_ALLOCATOR_ATTACHER_HPP

#include <cstdint>
#include <string>
#include <vector>

#include "loupe/sdk/host.hpp"

struct memalloc_bpf;

namespace loupe::memalloc {

// The allocator functions, in enum ma_func order, then free.
const std::vector<std::string>& allocator_functions();

class AllocatorAttacher {
 public:
  // `pid` -1 = every process that maps `binary`.
  AllocatorAttacher(const sdk::Host& host, memalloc_bpf* skel, std::string binary, int pid);

  // Attaches each of `functions` (names from allocator_functions()); malloc and free are
  // required, the others are skipped with a warning when the binary lacks them.
  // Returns the functions that could not be attached, with the reason.
  std::vector<std::pair<std::string, std::string>> attach(
      const std::vector<std::string>& functions);

 private:
  bool attach_one(const std::string& func, std::uint64_t offset, std::string& why);

  const sdk::Host& host_;
  memalloc_bpf* skel_;
  std::string binary_;
  int pid_;
};

}  // namespace loupe::memalloc

#endif  // LOUPE_MEMALLOC_ALLOCATOR_ATTACHER_HPP
