// SPDX-License-Identifier: Apache-2.0
//
// The lexical rules of Prometheus' text exposition format (version 0.0.4): metric and
// label names, escaped label values and HELP text, and numbers as Go's parser reads them.
#ifndef LOUPE_SINKS_PROMETHEUS_EXPOSITION_TEXT_HPP
#define LOUPE_SINKS_PROMETHEUS_EXPOSITION_TEXT_HPP

#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace loupe::sinks {

// [a-zA-Z_:][a-zA-Z0-9_:]*; anything else becomes '_', runs of '_' collapse.
std::string metric_name(std::string_view text);
// [a-zA-Z_][a-zA-Z0-9_]*, never starting with "__" (reserved for Prometheus itself).
std::string label_name(std::string_view text);
// Backslash, double quote and newline escaped.
std::string label_value(std::string_view text);
// Backslash and newline escaped.
std::string help_text(std::string_view text);
// Shortest text that reads back as the same double; +Inf, -Inf, NaN spelled as Go does.
std::string number(double v);

using Labels = std::vector<std::pair<std::string, std::string>>;  // sanitized names, raw values
// `{a="x",b="y"}`, or "" when empty; `extra` (e.g. le) goes last.
std::string label_set(const Labels& labels,
                      const std::pair<std::string, std::string>* extra = nullptr);

}  // namespace loupe::sinks

#endif  // LOUPE_SINKS_PROMETHEUS_EXPOSITION_TEXT_HPP
