// SPDX-License-Identifier: Apache-2.0
//
// The shared engine (loupe::core, core/CMakeLists.txt) is loupe_core linked whole; a
// shared library needs a source of its own, and this one says which engine it is.
#include "loupe/version.hpp"
