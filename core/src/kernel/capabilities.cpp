// SPDX-License-Identifier: Apache-2.0
#include "kernel/capabilities.hpp"

#include <linux/capability.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>

#include "util/errno_text.hpp"

namespace loupe {

std::string capability_name(int cap) {
  switch (cap) {
    case kCapDacReadSearch: return "CAP_DAC_READ_SEARCH";
    case kCapKill: return "CAP_KILL";
    case kCapSysPtrace: return "CAP_SYS_PTRACE";
    case kCapSysAdmin: return "CAP_SYS_ADMIN";
    case kCapSyslog: return "CAP_SYSLOG";
    case kCapPerfmon: return "CAP_PERFMON";
    case kCapBpf: return "CAP_BPF";
    case kCapCheckpointRestore: return "CAP_CHECKPOINT_RESTORE";
    default: return "cap#" + std::to_string(cap);
  }
}

EffectiveCapabilities effective_capabilities() {
  __user_cap_header_struct header{};
  header.version = _LINUX_CAPABILITY_VERSION_3;
  header.pid = 0;
  __user_cap_data_struct data[2] = {};
  EffectiveCapabilities caps;
  if (::syscall(SYS_capget, &header, data) != 0) {
    caps.error = "capget failed: " + errno_text(errno);
    return caps;
  }
  caps.ok = true;
  caps.mask = data[0].effective | (static_cast<std::uint64_t>(data[1].effective) << 32);
  return caps;
}

}  // namespace loupe
