// SPDX-License-Identifier: Apache-2.0
//
// How every core message names an errno: "EINVAL (Invalid argument)". The symbolic name is
// what users search for; the text is what they read. Kernel-internal codes that the
// verifier and BPF syscalls return (ENOTSUPP = 524) get a name too.
#ifndef LOUPE_UTIL_ERRNO_TEXT_HPP
#define LOUPE_UTIL_ERRNO_TEXT_HPP

#include <string>

namespace loupe {

// Accepts err or -err (libbpf returns negative codes).
std::string errno_text(int err);

}  // namespace loupe

#endif  // LOUPE_UTIL_ERRNO_TEXT_HPP
