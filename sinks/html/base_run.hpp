// SPDX-License-Identifier: Apache-2.0
//
// The base of a differential report: an earlier run's final stack records, read back from
// the records.jsonl its jsonl sink wrote (docs/records.md) and gathered exactly as this
// run's records are, so that both runs name frames and weigh stacks alike.
#ifndef LOUPE_SINKS_HTML_BASE_RUN_HPP
#define LOUPE_SINKS_HTML_BASE_RUN_HPP

#include <string>

#include "report_data.hpp"

namespace loupe::sinks {

// `where`: a records.jsonl, or the output directory holding one. Returns the file read;
// throws sdk::Error (LOUPE_ERR_INVALID_ARG: a config error, exit 3) when it cannot be read,
// is not records, or holds no final stack record.
std::string load_base_run(const std::string& where, ReportData& into);

}  // namespace loupe::sinks

#endif  // LOUPE_SINKS_HTML_BASE_RUN_HPP
