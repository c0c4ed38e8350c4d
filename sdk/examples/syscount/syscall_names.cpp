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

#if defined(__x86_64__)
// Syscalls newer than the build machine's headers (Debian 12's stop at 450) that the
// kernels loupe runs on have: without these, a 6.11+ kernel's busiest "syscall" under
// uretprobes read as sys_335 (the uretprobe trampoline's own syscall). x86_64 numbers from
// the kernel's syscall_64.tbl; 335 checked on 6.18 (SIGILL outside a trampoline).
constexpr Entry kNewer[] = {
    {335, "uretprobe"},         {336, "uprobe"},
    {451, "cachestat"},         {452, "fchmodat2"},
    {453, "map_shadow_stack"},  {454, "futex_wake"},
    {455, "futex_wait"},        {456, "futex_requeue"},
    {457, "statmount"},         {458, "listmount"},
    {459, "lsm_get_self_attr"}, {460, "lsm_set_self_attr"},
    {461, "lsm_list_modules"},  {462, "mseal"},
    {463, "setxattrat"},        {464, "getxattrat"},
    {465, "listxattrat"},       {466, "removexattrat"},
    {467, "open_tree_attr"},    {468, "file_getattr"},
    {469, "file_setattr"},
};
#endif

}  // namespace

std::string syscall_name(std::uint32_t nr) {
  for (const Entry& e : kTable) {
    if (e.nr == nr && e.name != nullptr) return e.name;
  }
#if defined(__x86_64__)
  for (const Entry& e : kNewer) {
    if (e.nr == nr) return e.name;
  }
#endif
  return "sys_" + std::to_string(nr);
}

}  // namespace syscount
