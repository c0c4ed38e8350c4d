// SPDX-License-Identifier: Apache-2.0
//
// What the embedder or the command line (`loupe run --duration ...`) sets over the
// profile: held to the bounds of the profile's own keys, every error at once (`errors`,
// one line each, for SessionResult::option_errors), then applied. Nothing runs before.
#ifndef LOUPE_SESSION_OVERRIDES_HPP
#define LOUPE_SESSION_OVERRIDES_HPP

#include <string>
#include <vector>

#include "loupe/session.hpp"
#include "plugins/profile.hpp"
#include "util/result.hpp"

namespace loupe {

Status apply_overrides(const SessionOptions& opts, SessionSpec& session,
                       std::vector<std::string>* errors);

}  // namespace loupe

#endif  // LOUPE_SESSION_OVERRIDES_HPP
