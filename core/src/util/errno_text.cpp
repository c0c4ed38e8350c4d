// SPDX-License-Identifier: Apache-2.0
#include "util/errno_text.hpp"

#include <cstring>

namespace loupe {

std::string errno_text(int err) {
  constexpr int kEnotsupp = 524;  // include/linux/errno.h, not exported to user space
  if (err < 0) err = -err;
  if (err == kEnotsupp) return "ENOTSUPP (operation not supported by this kernel)";
  const char* name = strerrorname_np(err);
  std::string text = name ? name : "errno " + std::to_string(err);
  return text + " (" + std::strerror(err) + ")";
}

}  // namespace loupe
