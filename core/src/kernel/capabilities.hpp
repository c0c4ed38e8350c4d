// SPDX-License-Identifier: Apache-2.0
//
// The capabilities loupe needs, named once: the numbers (older libc headers lack CAP_BPF
// and CAP_PERFMON), the names messages print, and how the calling thread's effective set
// is read. The preflight (features.cpp), the session's privilege check and the privilege
// drop (privileges.cpp) all use this table.
#ifndef LOUPE_KERNEL_CAPABILITIES_HPP
#define LOUPE_KERNEL_CAPABILITIES_HPP

#include <cstdint>
#include <string>

namespace loupe {

// From include/uapi/linux/capability.h.
inline constexpr int kCapDacReadSearch = 2;
inline constexpr int kCapKill = 5;
inline constexpr int kCapSysPtrace = 19;
inline constexpr int kCapSysAdmin = 21;
inline constexpr int kCapSyslog = 34;
inline constexpr int kCapPerfmon = 38;
inline constexpr int kCapBpf = 39;
inline constexpr int kCapCheckpointRestore = 40;

// "CAP_BPF"; "cap#N" for one loupe never needs.
std::string capability_name(int cap);

struct EffectiveCapabilities {
  bool ok = false;
  std::string error;  // why they could not be read
  std::uint64_t mask = 0;
  bool has(int cap) const { return (mask >> cap) & 1U; }
};
// The calling thread's effective set (capabilities are per thread).
EffectiveCapabilities effective_capabilities();

}  // namespace loupe

#endif  // LOUPE_KERNEL_CAPABILITIES_HPP
