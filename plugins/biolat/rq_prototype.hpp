// SPDX-License-Identifier: Apache-2.0
//
// Which argument of a block tracepoint is the request (or the bio), read from the
// kernel's BTF (the prototypes lost their request_queue argument in v5.11): probe the
// kernel, never compare versions.
#ifndef LOUPE_BIOLAT_RQ_PROTOTYPE_HPP
#define LOUPE_BIOLAT_RQ_PROTOTYPE_HPP

#include <optional>
#include <string>

namespace loupe::biolat {

// Which argument of `tracepoint` (0 = the first after the tracepoint's own __data) is
// the first `struct <type> *`; nullopt when BTF has no such tracepoint or argument
// (reason in `why`).
std::optional<int> tracepoint_pointer_arg(const char* tracepoint, const char* type,
                                          std::string* why);

// true: TP_PROTO(struct request *rq); false: TP_PROTO(struct request_queue *q,
// struct request *rq); nullopt when BTF has no such tracepoint (reason in `why`).
std::optional<bool> rq_tracepoint_single_arg(const char* tracepoint, std::string* why);

}  // namespace loupe::biolat

#endif  // LOUPE_BIOLAT_RQ_PROTOTYPE_HPP
