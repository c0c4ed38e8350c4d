// SPDX-License-Identifier: Apache-2.0
//
// gzip (RFC 1952) in memory: pprof files are gzip-compressed profile.proto messages.
#ifndef LOUPE_SINKS_PPROF_GZIP_HPP
#define LOUPE_SINKS_PPROF_GZIP_HPP

#include <string>
#include <string_view>

namespace loupe::sinks {

// Throws sdk::Error when zlib fails (out of memory).
std::string gzip_compress(std::string_view data);

}  // namespace loupe::sinks

#endif  // LOUPE_SINKS_PPROF_GZIP_HPP
