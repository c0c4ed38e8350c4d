// SPDX-License-Identifier: Apache-2.0
//
// Per-CPU bio_stats values -> one sum, interval deltas, and loupe_bucket arrays whose
// bounds are the log2 slots of loupe/hist.bpf.h.
#ifndef LOUPE_BIOLAT_BIO_HIST_HPP
#define LOUPE_BIOLAT_BIO_HIST_HPP

#include <span>
#include <vector>

#include "biolat.h"
#include "loupe/abi/records.h"

namespace loupe::biolat {

void merge_into(bio_hist& into, const bio_hist& h);
bio_stats merge_per_cpu(std::span<const bio_stats> per_cpu);
bio_proc merge_per_cpu(std::span<const bio_proc> per_cpu);

// `now - before` for an interval report. Counts, sums and slots are exact; the kernel
// keeps no per-interval min/max, so they are the bounds of the lowest and highest
// non-empty interval slots, clamped by the session's min and max.
bio_hist interval_delta(const bio_hist& now, const bio_hist& before);
bio_stats interval_delta(const bio_stats& now, const bio_stats& before);

// Non-empty slots, ascending, as [lower, upper) buckets.
std::vector<loupe_bucket> to_buckets(const bio_hist& h);

}  // namespace loupe::biolat

#endif  // LOUPE_BIOLAT_BIO_HIST_HPP
