// SPDX-License-Identifier: Apache-2.0
//
// Reading a plugin's declared config keys the one way the host does: by the stride the
// plugin compiled (config_key_size), and touching fields added after ABI 1.0 only when
// that stride covers them. Used by the descriptor check, the profile validator and
// `loupe describe`, so the three never disagree about what a key allows.
#ifndef LOUPE_PLUGINS_CONFIG_SCHEMA_HPP
#define LOUPE_PLUGINS_CONFIG_SCHEMA_HPP

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "loupe/abi/config.h"

namespace loupe {

inline const loupe_config_key* key_at(const loupe_config_key* keys, std::uint32_t i,
                                      std::uint32_t stride) {
  return reinterpret_cast<const loupe_config_key*>(reinterpret_cast<const unsigned char*>(keys) +
                                                   static_cast<std::size_t>(i) * stride);
}

// The allowed values of an enumerated key; empty when the key takes any value (or the
// plugin predates ABI 1.1).
inline std::vector<std::string_view> key_choices(const loupe_config_key& k, std::uint32_t stride) {
  std::vector<std::string_view> out;
  if (stride < offsetof(loupe_config_key, choices) + sizeof(k.choices) || k.choices == nullptr)
    return out;
  for (const char* const* c = k.choices; *c != nullptr; ++c) out.emplace_back(*c);
  return out;
}

// "\"a\", \"b\" or \"c\"" — how messages and `describe` list the choices.
inline std::string quoted_choices(const std::vector<std::string_view>& choices) {
  std::string s;
  for (std::size_t i = 0; i < choices.size(); ++i) {
    if (i) s += i + 1 == choices.size() ? " or " : ", ";
    s += "\"" + std::string(choices[i]) + "\"";
  }
  return s;
}

// The closest of `known` to `word` if it is a plausible misspelling (edit distance at most
// 2, and less than half the word), else empty: the "did you mean" of every validation error.
std::string nearest_name(std::string_view word, const std::vector<std::string>& known);

}  // namespace loupe

#endif  // LOUPE_PLUGINS_CONFIG_SCHEMA_HPP
