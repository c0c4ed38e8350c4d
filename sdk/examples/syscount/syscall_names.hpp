// SPDX-License-Identifier: Apache-2.0
#ifndef LOUPE_EXAMPLE_SYSCALL_NAMES_HPP
#define LOUPE_EXAMPLE_SYSCALL_NAMES_HPP

#include <cstdint>
#include <string>

namespace syscount {

// Name of a native (x86_64) syscall number, from the table generated at build time out of
// asm/unistd_64.h; "sys_<nr>" for numbers the table does not know.
std::string syscall_name(std::uint32_t nr);

}  // namespace syscount

#endif  // LOUPE_EXAMPLE_SYSCALL_NAMES_HPP
