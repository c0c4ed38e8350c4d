// SPDX-License-Identifier: Apache-2.0
#ifndef LOUPE_VERSION_HPP
#define LOUPE_VERSION_HPP
namespace loupe {
// The loupe release and the plugin ABI this host speaks.
const char* version() noexcept;
unsigned abi_major() noexcept;
unsigned abi_minor() noexcept;
}  // namespace loupe
#endif
