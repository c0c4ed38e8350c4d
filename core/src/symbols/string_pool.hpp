// SPDX-License-Identifier: Apache-2.0
//
// Interned strings with stable addresses: frames hand out `const char*` that must stay
// valid until the symbolizer is destroyed, while the tables they came from may be evicted.
// Grows with the number of distinct names ever returned (bounded by the symbols of the
// files seen), never with the number of frames. Not thread-safe: the symbolizer's lock
// guards it.
#ifndef LOUPE_SYMBOLS_STRING_POOL_HPP
#define LOUPE_SYMBOLS_STRING_POOL_HPP

#include <functional>
#include <string>
#include <string_view>
#include <unordered_set>

namespace loupe {

class StringPool {
 public:
  // Nodes of an unordered_set never move on rehash, so c_str() of an element is stable.
  const char* intern(std::string_view s) {
    auto it = set_.find(s);
    if (it == set_.end()) it = set_.emplace(s).first;
    return it->c_str();
  }
  std::size_t size() const { return set_.size(); }

 private:
  struct Hash {
    using is_transparent = void;
    std::size_t operator()(std::string_view s) const { return std::hash<std::string_view>{}(s); }
  };
  std::unordered_set<std::string, Hash, std::equal_to<>> set_;
};

}  // namespace loupe

#endif  // LOUPE_SYMBOLS_STRING_POOL_HPP
