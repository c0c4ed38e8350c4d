// SPDX-License-Identifier: Apache-2.0
#include "syscall_names.hpp"

namespace syscount {
namespace {

struct Entry {
  std::uint32_t nr;
  const char* name;
};

// Rows come from gen_syscall_names.cmake; the trailing sentinel keeps the array non-empty
// when no header was found. ~360 rows: a linear scan per collected syscall is cheap.
constexpr Entry kTable[] = {
#include "syscount_names.inc"
    {UINT32_MAX, nullptr},
};

}  // namespace

std::string syscall_name(std::uint32_t nr) {
  for (const Entry& e : kTable) {
    if (e.nr == nr && e.name != nullptr) return e.name;
  }
  return "sys_" + std::to_string(nr);
}

}  // namespace syscount
