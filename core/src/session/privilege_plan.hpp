// SPDX-License-Identifier: Apache-2.0
//
// What the session needs of the process's privileges, from the check before anything loads
// to the drop once every probe is attached (docs/reliability.md "Privileges").
#ifndef LOUPE_SESSION_PRIVILEGE_PLAN_HPP
#define LOUPE_SESSION_PRIVILEGE_PLAN_HPP

#include <optional>
#include <string>

#include "kernel/privileges.hpp"
#include "util/result.hpp"

namespace loupe {

class PrivilegePlan {
 public:
  // Fails with kPrivilege naming every missing capability; a session of sinks alone
  // (replaying, or reading nothing from the kernel) needs none.
  Status check(bool loads_programs) const;
  // Before any plugin runs: `user` (name or uid; empty: stay) must exist, and the output
  // directory becomes theirs so sinks can still create files after the switch.
  Status prepare_user(const std::string& user, const std::string& output_dir);
  // Once attached: keeps only what the rest of the run needs (and switches user if asked).
  // `requested`: the embedder's SessionOptions::drop_privileges (the CLI always sets it).
  Status drop_after_attach(bool requested, bool signals_command) const;

 private:
  std::optional<UserIdentity> run_as_;
};

}  // namespace loupe

#endif  // LOUPE_SESSION_PRIVILEGE_PLAN_HPP
