// SPDX-License-Identifier: Apache-2.0
//
// Which argument of block_rq_insert/block_rq_issue is the request, read from the
// kernel's BTF (the prototype lost its request_queue argument in v5.11): probe the
// kernel, never compare versions.
#ifndef LOUPE_BIOLAT_RQ_PROTOTYPE_HPP
#define LOUPE_BIOLAT_RQ_PROTOTYPE_HPP

#include <optional>
#include <string>

namespace loupe::biolat {

// true: TP_PROTO(struct request *rq); false: TP_PROTO(struct request_queue *q,
// struct request *rq); nullopt when BTF has no such tracepoint (reason in `why`).
std::optional<bool> rq_tracepoint_single_arg(const char* tracepoint, std::string* why);

}  // namespace loupe::biolat

#endif  // LOUPE_BIOLAT_RQ_PROTOTYPE_HPP
