// SPDX-License-Identifier: Apache-2.0
//
// File offset of a function in an ELF file, for uprobes. libbpf 1.1 refuses a name that
// .dynsym lists twice under two symbol versions (glibc's pthread_rwlock_rdlock@GLIBC_2.2.5
// and @@GLIBC_2.34 share one address), so the plugin resolves the offset itself.
#ifndef LOUPE_LOCKWAIT_ELF_FUNCTION_OFFSET_HPP
#define LOUPE_LOCKWAIT_ELF_FUNCTION_OFFSET_HPP

#include <cstdint>
#include <string>

namespace loupe::lockwait {

// 0 when the file cannot be read or no function symbol of that name (any version) exists.
std::uint64_t elf_function_offset(const std::string& path, const std::string& name);

}  // namespace loupe::lockwait

#endif  // LOUPE_LOCKWAIT_ELF_FUNCTION_OFFSET_HPP
