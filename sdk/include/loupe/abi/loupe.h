/* SPDX-License-Identifier: Apache-2.0 */
/* Umbrella header of the loupe plugin C ABI. See common.h for the stability rules. */
#ifndef LOUPE_ABI_LOUPE_H
#define LOUPE_ABI_LOUPE_H
#include "loupe/abi/common.h"
#include "loupe/abi/config.h"
#include "loupe/abi/host.h"
#include "loupe/abi/plugin.h"
#include "loupe/abi/records.h"
#endif
