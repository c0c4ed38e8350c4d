// SPDX-License-Identifier: Apache-2.0
//
// Label values shared by the reporter and the outlier decoder.
#ifndef LOUPE_BIOLAT_BIO_LABELS_HPP
#define LOUPE_BIOLAT_BIO_LABELS_HPP

#include <cstdint>

#include "biolat.h"

namespace loupe::biolat {

inline const char* op_name(std::uint8_t op) {
  switch (op) {
    case BIO_OP_READ: return "read";
    case BIO_OP_WRITE: return "write";
    case BIO_OP_FLUSH: return "flush";
    case BIO_OP_DISCARD: return "discard";
    default: return "other";
  }
}

inline const char* mechanism_name(std::uint32_t m) {
  switch (m) {
    case BIO_MECH_TP_BTF: return "tp_btf";
    case BIO_MECH_RAW_TP: return "raw_tp";
    default: return "tracepoint";
  }
}

}  // namespace loupe::biolat

#endif  // LOUPE_BIOLAT_BIO_LABELS_HPP
