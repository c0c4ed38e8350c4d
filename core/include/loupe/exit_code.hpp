// SPDX-License-Identifier: Apache-2.0
//
// How a run ended, as the CLI's exit status (documented in docs/cli.md "Exit codes"). Its
// own header: the session's parts decide which code a failure carries without reaching up
// to the session that runs them.
#ifndef LOUPE_EXIT_CODE_HPP
#define LOUPE_EXIT_CODE_HPP

namespace loupe {

// Documented in docs/cli.md; the CLI returns these.
enum class ExitCode : int {
  kOk = 0,
  kRuntime = 1,        // a plugin or sink failed during the run; internal errors
  kUsage = 2,          // bad command line
  kProfile = 3,        // profile syntax or schema error (file:line:col printed)
  kPlugin = 4,         // plugin not found, not a plugin, wrong ABI, duplicate name
  kKernel = 5,         // the kernel refused: missing feature, attach target, verifier
  kPrivilege = 6,      // missing capabilities (named)
  kTarget = 7,         // the command to profile could not be started; no process has the pid
  kDiffChanged = 8,    // loupe diff: something shifted between the two runs
  kInterrupted = 130,  // SIGINT/SIGTERM ended the session early (report still written)
};

}  // namespace loupe

#endif  // LOUPE_EXIT_CODE_HPP
