// SPDX-License-Identifier: Apache-2.0
#include "loupe/version.hpp"

#include "loupe/abi/common.h"

namespace loupe {
const char* version() noexcept {
  return LOUPE_VERSION;
}
unsigned abi_major() noexcept {
  return LOUPE_ABI_MAJOR;
}
unsigned abi_minor() noexcept {
  return LOUPE_ABI_MINOR;
}
}  // namespace loupe
