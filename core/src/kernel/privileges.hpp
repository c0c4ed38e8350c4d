// SPDX-License-Identifier: Apache-2.0
//
// Giving up privileges once every probe is attached (docs/reliability.md "Privileges").
// Loading and attaching need CAP_BPF + CAP_PERFMON (or CAP_SYS_ADMIN); what the session
// does afterwards — reading maps and rings through fds it already holds, symbolizing —
// needs far less. Credentials are per thread on Linux, and the session already runs
// threads (sink runners, ring reader and worker, plugin threads) when it drops: every
// thread of the process is made to apply the same change, or the drop fails.
#ifndef LOUPE_KERNEL_PRIVILEGES_HPP
#define LOUPE_KERNEL_PRIVILEGES_HPP

#include <sys/types.h>

#include <optional>
#include <string>
#include <vector>

#include "util/result.hpp"

namespace loupe {

struct UserIdentity {
  std::string name;
  uid_t uid = 0;
  gid_t gid = 0;
};

// Resolves a user name or a numeric uid through the password database.
Result<UserIdentity> lookup_user(const std::string& name_or_uid);

struct PostAttachNeeds {
  bool signal_command = false;  // loupe started the command and may have to stop it
};

// Capability numbers the session keeps after attaching, each for a reason:
//   CAP_SYS_PTRACE         /proc/PID/{maps,root} of another user's process (symbolizer)
//   CAP_DAC_READ_SEARCH    binaries and libraries the user may not read (symbolizer)
//   CAP_CHECKPOINT_RESTORE /proc/PID/map_files: deleted or replaced mapped files
//   CAP_SYSLOG             real addresses in /proc/kallsyms (read on the first kernel frame)
//   CAP_KILL               only when loupe started the command: stopping it at the end
// BPF map and ring reads through fds the session already holds need none (kernel >= 6.5
// checks capabilities at map creation and program load, not per command).
std::vector<int> post_attach_capabilities(const PostAttachNeeds& needs);

// Applies to every thread of the process: optionally switches to `user` (groups, gid, uid),
// then limits the permitted and effective sets to `keep` (a capability not currently
// permitted is skipped), clears the inheritable and ambient sets and sets no_new_privs.
// The error names the step and thread that failed.
Status drop_privileges(const std::vector<int>& keep, const std::optional<UserIdentity>& user);

}  // namespace loupe

#endif  // LOUPE_KERNEL_PRIVILEGES_HPP
