// SPDX-License-Identifier: Apache-2.0
// Umbrella header of the header-only C++ SDK.
#ifndef LOUPE_SDK_HPP
#define LOUPE_SDK_HPP
#include "loupe/abi/loupe.h"
#include "loupe/sdk/host.hpp"
#include "loupe/sdk/plugin.hpp"
#include "loupe/sdk/records.hpp"
#include "loupe/sdk/ring.hpp"
#endif
