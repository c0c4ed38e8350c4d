// SPDX-License-Identifier: Apache-2.0
//
// Per-CPU bio_stats / bio_proc values -> one sum, and bio_stats interval deltas. The
// histograms inside are summed and differenced by loupe/sdk/histogram.hpp (bio_hist has
// the LOUPE_HIST_RECORD shape with BIO_HIST_SLOTS log2 slots).
#ifndef LOUPE_BIOLAT_BIO_HIST_HPP
#define LOUPE_BIOLAT_BIO_HIST_HPP

#include <span>

#include "biolat.h"

namespace loupe::biolat {

bio_stats merge_per_cpu(std::span<const bio_stats> per_cpu);
bio_proc merge_per_cpu(std::span<const bio_proc> per_cpu);

// `now - before` for an interval report (see sdk::hist_interval_delta for min and max).
bio_stats interval_delta(const bio_stats& now, const bio_stats& before);

}  // namespace loupe::biolat

#endif  // LOUPE_BIOLAT_BIO_HIST_HPP
