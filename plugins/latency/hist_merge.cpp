// SPDX-License-Identifier: Apache-2.0
// Nothing left to compile: bench/core_paths lists this file; see hist_merge.hpp.
#include "hist_merge.hpp"
