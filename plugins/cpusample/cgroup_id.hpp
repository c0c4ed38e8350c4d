// SPDX-License-Identifier: Apache-2.0
#ifndef LOUPE_CPUSAMPLE_CGROUP_ID_HPP
#define LOUPE_CPUSAMPLE_CGROUP_ID_HPP

#include <cstdint>
#include <string>

namespace loupe::cpusample {

// A cgroup v2 given as a numeric id, a path under /sys/fs/cgroup, or an absolute path
// there -> its id (the kernfs inode number, what bpf_get_current_cgroup_id() returns).
// Throws sdk::Error(NOT_FOUND) when it is not a cgroup v2 directory.
std::uint64_t resolve_cgroup_id(const std::string& text);

}  // namespace loupe::cpusample

#endif  // LOUPE_CPUSAMPLE_CGROUP_ID_HPP
