// SPDX-License-Identifier: Apache-2.0
#include "exposition_text.hpp"

#include <charconv>
#include <cmath>

namespace loupe::sinks {
namespace {

bool alpha(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_';
}
bool digit(char c) {
  return c >= '0' && c <= '9';
}

std::string sanitize(std::string_view text, bool allow_colon) {
  std::string out;
  for (char c : text) {
    bool ok = alpha(c) || digit(c) || (allow_colon && c == ':');
    char o = ok ? c : '_';
    if (o == '_' && !out.empty() && out.back() == '_') continue;
    out += o;
  }
  if (out.empty() || digit(out.front())) out.insert(out.begin(), '_');
  return out;
}

}  // namespace

std::string metric_name(std::string_view text) {
  return sanitize(text, true);
}

// Runs of '_' collapse, so a sanitized name never starts with the reserved "__".
std::string label_name(std::string_view text) {
  return sanitize(text, false);
}

std::string label_value(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  for (char c : text) {
    if (c == '\\')
      out += "\\\\";
    else if (c == '"')
      out += "\\\"";
    else if (c == '\n')
      out += "\\n";
    else
      out += c;
  }
  return out;
}

std::string help_text(std::string_view text) {
  std::string out;
  for (char c : text) {
    if (c == '\\')
      out += "\\\\";
    else if (c == '\n')
      out += "\\n";
    else
      out += c;
  }
  return out;
}

// `general` picks fixed or scientific as %g does, at the shortest round-trip precision:
// 0.0003 rather than 3e-04.
std::string number(double v) {
  if (std::isnan(v)) return "NaN";
  if (std::isinf(v)) return v > 0 ? "+Inf" : "-Inf";
  // Integral values print as integers (1048576, not 1.048576e+06), exact below 2^53.
  if (std::fabs(v) < 9007199254740992.0 && v == std::trunc(v))
    return std::to_string(static_cast<long long>(v));
  char buf[64];
  auto res = std::to_chars(buf, buf + sizeof(buf), v, std::chars_format::general);
  return std::string(buf, res.ptr);
}

std::string label_set(const Labels& labels, const std::pair<std::string, std::string>* extra) {
  if (labels.empty() && !extra) return {};
  std::string out = "{";
  auto add = [&](const std::pair<std::string, std::string>& kv) {
    if (out.size() > 1) out += ',';
    out += kv.first;
    out += "=\"";
    out += label_value(kv.second);
    out += '"';
  };
  for (const auto& kv : labels) add(kv);
  if (extra) add(*extra);
  out += '}';
  return out;
}

}  // namespace loupe::sinks
