// SPDX-License-Identifier: Apache-2.0
//
// A file written whole and renamed into place, so a reader (or a crash) never sees half
// of it.
#ifndef LOUPE_SINKS_HTML_ATOMIC_FILE_HPP
#define LOUPE_SINKS_HTML_ATOMIC_FILE_HPP

#include <string>
#include <string_view>

namespace loupe::sinks {

// Throws sdk::Error naming the path on failure.
void replace_file(const std::string& path, std::string_view bytes);

// `file` under `dir` unless it is absolute.
std::string join_path(const std::string& dir, const std::string& file);

// A record name as a file name: [A-Za-z0-9_.-], never empty, never hidden.
std::string file_stem(const std::string& name);

}  // namespace loupe::sinks

#endif  // LOUPE_SINKS_HTML_ATOMIC_FILE_HPP
