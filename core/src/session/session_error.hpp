// SPDX-License-Identifier: Apache-2.0
//
// How the session's parts say why a run cannot go on: a Status whose code is the exit code
// the session ends with (loupe::ExitCode), so each part decides what kind of failure it
// met and the conductor only passes it up.
#ifndef LOUPE_SESSION_SESSION_ERROR_HPP
#define LOUPE_SESSION_SESSION_ERROR_HPP

#include <string>

#include "loupe/exit_code.hpp"
#include "util/result.hpp"

namespace loupe {

inline Error session_error(ExitCode code, std::string message) {
  return Error{std::move(message), static_cast<int>(code)};
}

inline ExitCode exit_code_of(const Status& st) {
  return st.code() ? static_cast<ExitCode>(st.code()) : ExitCode::kRuntime;
}

// A plugin hook's LOUPE_ERR_* status, as the exit code of a run it ends.
ExitCode exit_code_for_plugin_status(int status);

}  // namespace loupe

#endif  // LOUPE_SESSION_SESSION_ERROR_HPP
